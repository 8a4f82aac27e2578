"""The text family's config: tables of texts and labels, pooling over a text's states or over
a transformer's layers, regression's calibration, and the top-level configs of recurrent and
layer-pooling classifiers and regressors (one class per kind, so that what a kind predicts is
its class's, not a test of its name)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from bistack.config import (
    SHARED_RANGES,
    BackboneConfig,
    EncoderConfig,
    ExperimentConfig,
    FeaturesConfig,
    OptimizerConfig,
    OverBackbone,
    PartDropoutConfig,
    Range,
    SplitConfig,
    TrainConfig,
    check_features,
    check_part_dropout,
    set_calibrate,
)
from bistack.errors import ConfigError

RANGES: tuple[Range, ...] = (
    *SHARED_RANGES,
    ("pooling.attention_size", 1, True, None),
    ("layer_pooling.lstm_hidden", 1, True, None),
    ("layer_pooling.dropout", 0.0, True, 0.99),
    ("layer_pooling.start_layer", 1, True, None),
)


@dataclass
class TextDataConfig(SplitConfig):
    """Tables of texts and labels for classification and regression: .tsv, .csv, .jsonl,
    .parquet, or a HuggingFace dataset folder (``Dataset.save_to_disk``; one split's folder)."""

    CROSS_VALIDATION_KEYS = ("group_column", "fold_column", "order_column", "order_format")

    # auto: from the file extension, or datasets for a folder
    format: Literal["auto", "tsv", "csv", "jsonl", "parquet", "datasets"] = "auto"
    text_column: str = "text"  # the column (or JSON field) holding each text
    label_columns: list[str] = field(default_factory=lambda: ["label"])  # regression: 1 or more
    # Cross-validation (bistack cv): the column naming each row's group (an author, a
    # document); a group's rows are never split across folds, and the classes (or binned
    # targets) are balanced over the folds as well as whole groups allow. None: rows alone.
    group_column: str | None = None
    # Cross-validation: a column of each row's fold (0 to K-1, a notebook's saved ``kfold``,
    # shared by every model of a team): the folds exactly as given. None: bistack splits.
    fold_column: str | None = None
    # Cross-validation: the column naming each row (an id); its value is written beside each
    # out-of-fold prediction (after ``row``), so that oof.csv joins back to the table on it.
    id_column: str | None = None
    # Cross-validation with --split time: the column of each row's time (a number, or a date
    # written as ISO's YYYY-MM-DD); each fold trains on the rows before those it holds out.
    order_column: str | None = None
    # How data.order_column writes its dates, as strftime does ("%d/%m/%Y", "%m/%d/%Y"):
    # needed where day and month could be either way round. None: numbers or ISO dates.
    order_format: str | None = None

    def table_columns(self) -> tuple[str | None, str | None]:
        return self.text_column, self.id_column


@dataclass
class RegressionConfig:
    # After training, fit each output's scale and offset to the dev targets by least squares,
    # and keep them with the model. It undoes a shift the network learnt, e.g. from texts with
    # more unknown words at prediction than in training. Early stopping then compares epochs by
    # their calibrated dev RMSE. Regressors only.
    calibrate: bool = False


@dataclass
class PoolingConfig:
    # How a text's states become one vector: final states, masked mean or max, or attention.
    type: Literal["last", "mean", "max", "additive", "dot"] = "additive"
    attention_size: int = 128  # additive attention only


@dataclass
class LayerPoolingConfig:
    # lstm/gru: recurrent pooling over depth; weighted: ScalarMix; attention: learned query;
    # cls / mean: the last layer's CLS vector / masked token mean; concat_last4 / concat_all:
    # the last 4 / every selected layer's vectors side by side.
    type: Literal[
        "lstm", "gru", "weighted", "attention", "cls", "mean", "concat_last4", "concat_all"
    ] = "lstm"
    layers: str | list[int] = "all"  # "all", "every_other", or 1-based layers, e.g. [2, 4, 6]
    lstm_hidden: int = 256  # lstm/gru: hidden size per direction
    summary: Literal["final_states", "last_output"] = "final_states"  # lstm/gru only
    dropout: float = 0.1  # on the pooled vector
    start_layer: int = 1  # weighted: first layer (within the selection) that gets a weight
    # Per-layer vectors the lstm/gru/weighted/attention/concat poolers read: each layer's
    # CLS vector (the usual choice) or its masked token mean (for encoders trained with mean
    # pooling, such as all-MiniLM-L6-v2, whose CLS vectors are not trained as summaries). The
    # cls and mean poolers always read their own.
    vectors: Literal["cls", "mean"] = "cls"


@dataclass
class TextModelConfig(ExperimentConfig):
    """Everything needed to train (and rebuild) a recurrent text classifier or regressor.

    The default shape is the classic BiLSTM-attention classifier (Zhou et al. 2016): embeddings,
    a BiLSTM, additive attention pooling and a linear head. Whether it classifies or regresses
    is its kind's (:class:`Classifies`, :class:`Regresses`).
    """

    RANGES: ClassVar[tuple[Range, ...]] = RANGES
    SUMMARY_KEYS: ClassVar[tuple[str, ...]] = ("features", "encoder", "pooling")
    INPUT_KEYS: ClassVar[tuple[str, ...]] = (*ExperimentConfig.INPUT_KEYS, "features.pretrained")

    kind: str = "classifier"
    data: TextDataConfig = field(default_factory=TextDataConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    pooling: PoolingConfig = field(default_factory=PoolingConfig)
    regression: RegressionConfig = field(default_factory=RegressionConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self, source: str) -> None:
        super().validate(source)
        self.check_labels(self.data, source)
        check_features(self.features, source)

    def check_labels(self, data: TextDataConfig, source: str) -> None:
        raise NotImplementedError  # Classifies or Regresses says


class Classifies:
    """A classifier's labels: one column, one label a text; nothing to calibrate in values."""

    regression: RegressionConfig
    kind: str

    def check_labels(self, data: TextDataConfig, source: str) -> None:
        columns = data.label_columns
        if not columns:
            raise ConfigError(f"{source}: data.label_columns must name at least one column")
        if len(columns) != 1:
            raise ConfigError(
                f"{source}: classification takes one label column, got {len(columns)}: {columns}"
            )
        if self.regression.calibrate:
            raise ConfigError(
                f"{source}: regression.calibrate is for regressors, not a {self.kind}"
            )


class Regresses:
    """A regressor's targets: one or more columns of values, calibrated on dev when asked."""

    def check_labels(self, data: TextDataConfig, source: str) -> None:
        if not data.label_columns:
            raise ConfigError(f"{source}: data.label_columns must name at least one column")

    @classmethod
    def take_calibrate(cls, data: dict[str, Any], calibrate: Any) -> None:
        """An earlier version's ``train.calibrate``, true or false, is ``regression.calibrate``."""
        set_calibrate(data, calibrate)


@dataclass
class ClassifierConfig(Classifies, TextModelConfig):
    kind: Literal["classifier"] = "classifier"


@dataclass
class RegressorConfig(Regresses, TextModelConfig):
    kind: Literal["regressor"] = "regressor"


@dataclass
class LayerPoolingTextConfig(OverBackbone, ExperimentConfig):
    """A classifier or regressor whose head pools over a transformer's layers (second seed)."""

    RANGES: ClassVar[tuple[Range, ...]] = RANGES
    SUMMARY_KEYS: ClassVar[tuple[str, ...]] = (
        "features",
        "encoder",
        "pooling",
        "backbone",
        "layer_pooling",
    )
    INPUT_KEYS: ClassVar[tuple[str, ...]] = (
        *ExperimentConfig.INPUT_KEYS,
        "features.pretrained",
        "backbone.path",
    )
    HUB_KEYS: ClassVar[tuple[str, ...]] = ("backbone.path",)

    kind: str = "layer_classifier"
    data: TextDataConfig = field(default_factory=TextDataConfig)
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    layer_pooling: LayerPoolingConfig = field(default_factory=LayerPoolingConfig)
    # Stacked beside the pooled layers when given (none when absent or null): the text read by
    # a recurrent text model, its token features -> encoder -> pooling; its vector joins the
    # pooled layers' before the linear layer. encoder and pooling are that reading's.
    features: FeaturesConfig | None = None
    encoder: EncoderConfig = field(default_factory=lambda: EncoderConfig(hidden_size=128))
    pooling: PoolingConfig = field(default_factory=PoolingConfig)
    # transformer: the pooled layers' vector, dropped per text; the rest per token.
    part_dropout: PartDropoutConfig = field(default_factory=PartDropoutConfig)
    regression: RegressionConfig = field(default_factory=RegressionConfig)
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(name="adamw", lr=1e-3, lr_decay=0.0, grad_clip=1.0)
    )
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_epochs=20, patience=4))

    def validate(self, source: str) -> None:
        super().validate(source)
        self.check_labels(self.data, source)
        check_layers(self.layer_pooling.layers, source)
        self.backbone.check(source)
        if self.backbone.context:
            raise ConfigError(
                f"{source}: backbone.context is read by taggers (the sentences around each "
                "sentence of a document); a text model reads each text whole: leave it 0"
            )
        check_features(self.features, source)
        check_part_dropout(self.part_dropout, self.features, source)

    @classmethod
    def upgrade(cls, data: dict[str, Any], legacy: bool, source: str) -> None:
        """``train.dropout`` was never read by these models: dropped from files of earlier
        versions, an error naming ``layer_pooling.dropout`` in new ones."""
        train = data.get("train")
        if isinstance(train, dict) and "dropout" in train:
            if not legacy:
                raise ConfigError(
                    f"{source}: train.dropout is not read by models over transformer layers; "
                    "their dropout is layer_pooling.dropout"
                )
            train.pop("dropout")
        super().upgrade(data, legacy, source)

    def check_labels(self, data: TextDataConfig, source: str) -> None:
        raise NotImplementedError  # Classifies or Regresses says


@dataclass
class LayerClassifierConfig(Classifies, LayerPoolingTextConfig):
    kind: Literal["layer_classifier"] = "layer_classifier"


@dataclass
class LayerRegressorConfig(Regresses, LayerPoolingTextConfig):
    kind: Literal["layer_regressor"] = "layer_regressor"


def check_layers(layers: str | list[int], source: str) -> None:
    if isinstance(layers, str) and layers not in ("all", "every_other"):
        raise ConfigError(
            f"{source}: layer_pooling.layers must be 'all', 'every_other' or a list of layer "
            f"numbers, got {layers!r}"
        )
