"""Experiment configuration: dataclasses read from YAML, overridable with ``key=value``.

Each field says what it controls. Unknown keys and wrong types are errors that name the key, so a
typo never silently falls back to a default. Every top-level config names its model ``kind``;
which config class a kind uses is the task table's business (``bistack.tasks``), so this module
builds a given class and never decides a kind. Configs written by earlier versions (a ``task``
plus a ``backbone`` section, dropout under ``train``) are rewritten once, by ``upgrade_legacy``.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from bistack.errors import ConfigError

C = TypeVar("C", bound="ExperimentConfig")


@dataclass
class SplitConfig:
    """Where training data comes from, and how dev is held out when no dev file is given."""

    train: str = ""  # the training file
    dev: str | None = None  # file for early stopping; None: split off dev_fraction of train
    dev_fraction: float = 0.1  # used only when dev is None
    split_seed: int = 0  # seed of that split, fixed so runs compare on the same dev set


@dataclass
class DataConfig(SplitConfig):
    """Tagged sentences for tagging: CoNLL columns, CoNLL-U, or span-annotated JSON lines."""

    # auto: .conllu is CoNLL-U, .jsonl/.json span JSON lines (doccano, Label Studio), else CoNLL
    format: Literal["auto", "conll", "conllu", "spans"] = "auto"
    token_column: int = 0  # CoNLL: column of the token (0 = first)
    tag_column: int = -1  # CoNLL: column of the tag (-1 = last)
    tag_field: str = "upos"  # CoNLL-U: the tag's column (upos, xpos...) or misc:KEY (misc:NER)
    # Span files: a span whose ends are not token boundaries is an error naming its line
    # (reject), or is widened to the tokens it touches and reported (snap).
    misaligned_spans: Literal["reject", "snap"] = "reject"
    # The scheme the model trains in; none: each tag is a label of its own (parts of speech),
    # with no entities, every transition allowed, and per-token accuracy as the dev score.
    scheme: Literal["IOB1", "BIO", "BIOES", "none"] = "BIOES"


@dataclass
class TextDataConfig(SplitConfig):
    """Tables of texts and labels for classification and regression: .tsv, .csv, .jsonl,
    .parquet, or a HuggingFace dataset folder (``Dataset.save_to_disk``; one split's folder)."""

    # auto: from the file extension, or datasets for a folder
    format: Literal["auto", "tsv", "csv", "jsonl", "parquet", "datasets"] = "auto"
    text_column: str = "text"  # the column (or JSON field) holding each text
    label_columns: list[str] = field(default_factory=lambda: ["label"])  # regression: 1 or more
    tokenizer: Literal["whitespace", "text"] = "text"  # whitespace for pre-tokenised data


@dataclass
class CorpusConfig(SplitConfig):
    """A plain text file, one sentence or paragraph per line, for language modelling."""

    tokenizer: Literal["whitespace", "text"] = "whitespace"  # text: words and punctuation
    max_length: int = 64  # tokens per training sequence; longer lines are cut into pieces


@dataclass
class FeaturesConfig:
    """A token's own features, stacked (concatenated) before the encoder: a word embedding, a
    casing class and a character-level encoding of the word; each can be turned off."""

    word_dim: int = 100  # word embedding size; 0: no word embedding
    min_freq: int = 1  # words rarer than this in train map to <unk>
    lowercase: bool = True  # look words up lowercased (the casing feature keeps the case)
    normalise_digits: bool = True  # every digit becomes 0 before lookup
    casing_dim: int = 10  # casing-class embedding size; 0 turns the feature off
    unk_replace: float = 0.5  # in training, a singleton word becomes <unk> with this probability
    # Word vectors to initialise word embeddings: GloVe or word2vec text, fastText .vec, or
    # word2vec binary (.bin); their words join the vocabulary (see pretrained_max_words).
    pretrained: str | None = None
    pretrained_format: Literal["auto", "text", "binary"] = "auto"  # auto: .bin is binary
    # Words of the vector file added beyond the training data's, most frequent (first) first.
    pretrained_max_words: int = 100_000
    freeze_pretrained: bool = False  # keep the word embeddings as the vectors give them
    char_encoder: Literal["lstm", "cnn", "none"] = "lstm"  # character-level word encoder
    char_dim: int = 25  # character embedding size
    char_hidden: int = 25  # char BiLSTM hidden size per direction, or CNN filters


@dataclass
class PartDropoutConfig:
    """In training, each token's vector from one stacked part is zeroed with this probability
    (the others are kept, and the part is rescaled by 1 / (1 - p)), so the model cannot lean on
    one part alone; 0 turns it off for that part."""

    transformer: float = 0.0  # the transformer's word state
    words: float = 0.0  # the word embedding
    chars: float = 0.0  # the character-level encoding
    casing: float = 0.0  # the casing embedding


@dataclass
class LayerMixConfig:
    """How a word's states in every transformer layer become one vector."""

    # weighted: a learned softmax mix of the layers (ScalarMix, the same for every word);
    # lstm: a BiLSTM over the word's layers, shallow to deep, its two final states.
    type: Literal["weighted", "lstm"] = "weighted"
    lstm_hidden: int = 128  # lstm: hidden size per direction


@dataclass
class EncoderConfig:
    # The recurrent cell; mingru/minlstm (Feng et al. 2024) compute a layer at every position at
    # once (a matrix product and a parallel scan) instead of one position after another.
    cell: Literal["lstm", "gru", "mingru", "minlstm"] = "lstm"
    hidden_size: int = 200  # per direction
    bidirectional: bool = True  # False for causal models: streaming, language models
    num_layers: int = 1  # stacked layers
    residual: bool = False  # residual stack (each layer's input added to its output)
    dropout: float = 0.5  # between stacked layers
    # On the vectors entering the encoder and on what leaves it (its states, or the pooled
    # vector of a text model); was train.dropout before the task table.
    outer_dropout: float = 0.5


@dataclass
class HeadConfig:
    type: Literal["crf", "softmax"] = "crf"  # CRF constrained to the scheme, or per-token softmax
    # Streaming (``bistack predict --stream``), CRF only: commit each tag this many tokens after
    # its token arrives; 0 is greedy, and a lag at least the sentence length is exact Viterbi.
    stream_lag: int = 0


@dataclass
class OptimizerConfig:
    name: Literal["sgd", "adam", "adamw"] = "sgd"  # the optimiser
    lr: float = 0.1  # learning rate (a fine-tuned backbone has its own, backbone.lr)
    momentum: float = 0.9  # SGD only
    weight_decay: float = 0.0
    lr_decay: float = 0.05  # lr / (1 + lr_decay * epoch), as in Ma & Hovy 2016
    grad_clip: float = 5.0  # max gradient norm; 0 turns clipping off
    # Fraction of all training steps with a linear warm-up, after which the rate decays
    # linearly to 0 (the usual fine-tuning schedule); 0: no warm-up, lr_decay per epoch only.
    warmup_fraction: float = 0.0


@dataclass
class TrainConfig:
    batch_size: int = 32  # training examples per step
    max_epochs: int = 30  # at most this many passes over the training data
    patience: int = 5  # stop after this many epochs without a better dev score
    seed: int = 1  # seeds every random draw: initialisation, batch order, dropout
    max_minutes: float | None = None  # stop after the epoch that crosses this wall-clock budget
    eval_batch_size: int = 256  # examples per batch when scoring dev and predicting
    # Training batches of similar length waste little compute on padding. Off: random batches,
    # whose targets are a fair sample, for regression where length correlates with the target
    # (length-sorted batches then pull the output bias back and forth from batch to batch).
    length_buckets: bool = True
    # Write a checkpoint (weights, optimizer, generators, epoch, early stopping) every this many
    # epochs, for ``bistack train --resume``; 0: none.
    checkpoint_every: int = 1


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
class BackboneConfig:
    path: str = "default"  # local HuggingFace encoder folder; "default": all-MiniLM-L6-v2
    max_length: int | None = None  # subwords per window; None: the model's own limit
    long_texts: Literal["truncate", "sliding_window"] = "truncate"  # texts over max_length
    stride: int = 64  # subwords consecutive windows share (sliding_window only)
    finetune: bool = False  # False: frozen backbone, per-layer vectors from the feature cache
    lr: float = 2e-5  # backbone learning rate when fine-tuned (optimizer.lr is the head's)
    cache_dir: str = "runs/feature-cache"  # where the frozen backbone's vectors are cached
    batch_size: int = 32  # texts per backbone forward when computing cached vectors


@dataclass
class LayerPoolingConfig:
    # lstm/gru: recurrent pooling over depth; weighted: ScalarMix; attention: learned query;
    # cls / mean: the last layer's CLS vector / masked token mean; concat_last4: last 4 CLS.
    type: Literal["lstm", "gru", "weighted", "attention", "cls", "mean", "concat_last4"] = "lstm"
    layers: str | list[int] = "all"  # "all", "every_other", or 1-based layers, e.g. [2, 4, 6]
    lstm_hidden: int = 256  # lstm/gru: hidden size per direction
    summary: Literal["final_states", "last_output"] = "final_states"  # lstm/gru only
    dropout: float = 0.1  # on the pooled vector
    start_layer: int = 1  # weighted: first layer (within the selection) that gets a weight
    # Per-layer vectors the lstm/gru/weighted/attention/concat_last4 poolers read: each layer's
    # CLS vector (the usual choice) or its masked token mean (for encoders trained with mean
    # pooling, such as all-MiniLM-L6-v2, whose CLS vectors are not trained as summaries). The
    # cls and mean poolers always read their own.
    vectors: Literal["cls", "mean"] = "cls"


@dataclass
class ExperimentConfig:
    """What every top-level config has: the model kind, and how training runs."""

    kind: str  # the model kind (the task table's key); each config class fixes its own
    optimizer: OptimizerConfig
    train: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        """Plain data for config.json and for comparing runs."""
        return dataclasses.asdict(self)

    def validate(self, source: str) -> None:
        """Reject values that would only fail later, deep inside torch; subclasses add theirs."""
        data = getattr(self, "data", None)
        if isinstance(data, SplitConfig) and not data.train:
            raise ConfigError(f"{source}: data.train is required: the file to train on")
        check_ranges(self, source)


@dataclass
class TaggerConfig(ExperimentConfig):
    """Everything needed to train (and rebuild) a sequence tagger."""

    kind: Literal["tagger"] = "tagger"
    data: DataConfig = field(default_factory=DataConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self, source: str) -> None:
        super().validate(source)
        check_tagging_data(self.data, source)
        check_features(self.features, source)


@dataclass
class TextModelConfig(ExperimentConfig):
    """Everything needed to train (and rebuild) a text classifier or regressor.

    The default shape is the classic BiLSTM-attention classifier (Zhou et al. 2016): embeddings,
    a BiLSTM, additive attention pooling and a linear head.
    """

    kind: Literal["classifier", "regressor"] = "classifier"
    data: TextDataConfig = field(default_factory=TextDataConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    pooling: PoolingConfig = field(default_factory=PoolingConfig)
    regression: RegressionConfig = field(default_factory=RegressionConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self, source: str) -> None:
        super().validate(source)
        check_labels(self.kind, self.data, self.regression, source)
        check_features(self.features, source)


@dataclass
class LayerPoolingTextConfig(ExperimentConfig):
    """A classifier or regressor whose head pools over a transformer's layers (second seed)."""

    kind: Literal["layer_classifier", "layer_regressor"] = "layer_classifier"
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
        check_labels(self.kind, self.data, self.regression, source)
        check_layers(self.layer_pooling.layers, source)
        check_features(self.features, source)
        check_part_dropout(self.part_dropout, self.features, source)


@dataclass
class LayerPoolingTaggerConfig(ExperimentConfig):
    """A tagger over a transformer's word-level states: the layers of each word mixed into one
    vector, optionally stacked with the word's own features (word embedding, characters,
    casing), then the recurrent encoder and the CRF of a recurrent tagger."""

    kind: Literal["layer_tagger"] = "layer_tagger"
    data: DataConfig = field(default_factory=DataConfig)
    backbone: BackboneConfig = field(default_factory=lambda: BackboneConfig(batch_size=64))
    # A word's state: its first subword's, the mean of its subwords', or its last subword's.
    subwords: Literal["first", "mean", "last"] = "first"
    layer_mix: LayerMixConfig = field(default_factory=LayerMixConfig)
    # Features stacked beside the transformer's word state: none when absent (null); a section,
    # even an empty one, stacks the recurrent tagger's (words, a char BiLSTM, casing) as given.
    features: FeaturesConfig | None = None
    part_dropout: PartDropoutConfig = field(default_factory=PartDropoutConfig)
    encoder: EncoderConfig = field(default_factory=lambda: EncoderConfig(outer_dropout=0.3))
    head: HeadConfig = field(default_factory=HeadConfig)
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(name="adam", lr=1e-3, lr_decay=0.0)
    )
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self, source: str) -> None:
        super().validate(source)
        check_tagging_data(self.data, source)
        check_features(self.features, source)
        check_part_dropout(self.part_dropout, self.features, source)


@dataclass
class LanguageModelConfig(ExperimentConfig):
    """A causal LSTM language model: next-token prediction, perplexity, sampling.

    Causal by definition: a bidirectional encoder is refused (it would read the token it must
    predict) unless ``allow_leakage`` is set, which only a demonstration of that leakage does.
    """

    kind: Literal["language_model"] = "language_model"
    data: CorpusConfig = field(default_factory=CorpusConfig)
    features: FeaturesConfig = field(
        default_factory=lambda: FeaturesConfig(
            casing_dim=0, char_encoder="none", unk_replace=0.0, normalise_digits=False
        )
    )
    encoder: EncoderConfig = field(
        default_factory=lambda: EncoderConfig(bidirectional=False, outer_dropout=0.3)
    )
    allow_leakage: bool = False  # True builds a bidirectional "language model" that cheats
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(name="adam", lr=2e-3, lr_decay=0.0)
    )
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self, source: str) -> None:
        super().validate(source)
        if self.features.word_dim == 0:
            raise ConfigError(
                f"{source}: features.word_dim must be >= 1: a language model "
                "predicts words from their embeddings"
            )
        if self.encoder.bidirectional:
            from bistack.causality import require_causal

            try:
                require_causal(True, "a language model", self.allow_leakage)
            except ValueError as error:
                raise ConfigError(f"{source}: encoder.bidirectional is true, but {error}") from None


def read_yaml(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """A YAML config file as a mapping, with ``key.sub=value`` overrides applied (values parsed
    as YAML) and earlier versions' keys upgraded."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder; expected a YAML config file") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
            f"{error.start}); expected a YAML config file"
        ) from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    for override in overrides or []:
        apply_override(data, override)
    return upgrade_legacy(data, source=str(path))


def apply_override(data: dict[str, Any], override: str) -> None:
    """Set ``a.b=value`` in nested ``data``."""
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {override!r}: expected key=value, e.g. train.max_epochs=30")
    *parents, leaf = key.split(".")
    node = data
    for parent in parents:
        node = node.setdefault(parent, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {override!r}: {parent!r} is not a section")
    try:
        node[leaf] = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise ConfigError(f"--set {override!r}: the value is not valid YAML ({problem})") from None


REGRESSION_KINDS = frozenset({"regressor", "layer_regressor"})  # text kinds that predict values
LAYER_TEXT_KINDS = frozenset({"layer_classifier", "layer_regressor"})  # no encoder section

# (task, has a backbone section) -> kind, for configs written before kinds were explicit.
_LEGACY_KINDS = {
    ("tagging", False): "tagger",
    ("tagging", True): "layer_tagger",
    ("classification", False): "classifier",
    ("classification", True): "layer_classifier",
    ("regression", False): "regressor",
    ("regression", True): "layer_regressor",
    ("language_model", False): "language_model",
}


def upgrade_legacy(data: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """A copy of ``data`` in today's form; the one place that reads earlier layouts.

    Before kinds were explicit, ``task`` plus the presence of a ``backbone`` section named the
    kind. Moved keys keep working: ``train.dropout`` is ``encoder.outer_dropout`` (layer-pooling
    text models never read it: dropped from old files, an error naming ``layer_pooling.dropout``
    in new ones) and ``train.calibrate`` is ``regression.calibrate``.
    """
    train = data.get("train")
    moved = isinstance(train, dict) and ("dropout" in train or "calibrate" in train)
    if "task" not in data and not moved:
        return data
    data = copy.deepcopy(data)
    legacy = "task" in data
    if legacy:
        task = data.pop("task")
        if "kind" in data:
            raise ConfigError(f"{source}: give kind or the older task, not both")
        key = (task, "backbone" in data)
        if key not in _LEGACY_KINDS:
            tasks = sorted({t for t, _ in _LEGACY_KINDS})
            raise ConfigError(f"{source}: task must be one of {', '.join(tasks)}, got {task!r}")
        data["kind"] = _LEGACY_KINDS[key]
    kind = data.get("kind", "tagger")
    train = data.get("train")
    if isinstance(train, dict) and "dropout" in train:
        dropout = train.pop("dropout")
        if kind in LAYER_TEXT_KINDS:
            if not legacy:
                raise ConfigError(
                    f"{source}: train.dropout is not read by models over transformer layers; "
                    "their dropout is layer_pooling.dropout"
                )
        else:
            encoder = data.setdefault("encoder", {})
            if isinstance(encoder, dict):
                if "outer_dropout" in encoder and encoder["outer_dropout"] != dropout:
                    raise ConfigError(
                        f"{source}: train.dropout is now encoder.outer_dropout; give only that"
                    )
                encoder["outer_dropout"] = dropout
    if isinstance(train, dict) and "calibrate" in train:
        calibrate = train.pop("calibrate")
        if calibrate or kind in REGRESSION_KINDS:
            regression = data.setdefault("regression", {})
            if isinstance(regression, dict):
                regression["calibrate"] = calibrate
    return data


def build_config(cls: type[C], data: dict[str, Any], source: str = "config") -> C:
    """A validated ``cls`` from ``data`` (already upgraded); errors name the key."""
    config = _build(cls, data, source, "")
    config.validate(source)
    return config


def same_settings(recorded: dict[str, Any], config: ExperimentConfig) -> bool:
    """Whether a config recorded by an earlier run equals ``config``, keys added since then
    counting as their defaults (so a finished run stays reusable across versions)."""
    try:
        upgraded = upgrade_legacy(recorded, "recorded run")
        return build_config(type(config), upgraded, "recorded run").to_dict() == config.to_dict()
    except ConfigError:
        return False


def check_tagging_data(data: DataConfig, source: str) -> None:
    from bistack.data.tagged import tagged_format

    files = [data.train, *([data.dev] if data.dev else [])]
    if data.scheme == "none" and any(tagged_format(f, data.format) == "spans" for f in files):
        raise ConfigError(
            f"{source}: data.scheme none has no entities, and span files hold only entities; "
            "choose IOB1, BIO or BIOES for span files"
        )


def check_features(features: FeaturesConfig | None, source: str) -> None:
    """Features that are given must have a part that is on."""
    if features is None:
        return
    if not (features.word_dim or features.casing_dim or features.char_encoder != "none"):
        raise ConfigError(
            f"{source}: every feature is off (features.word_dim 0, casing_dim 0, char_encoder "
            "none); turn on at least one"
        )
    if features.pretrained and features.word_dim == 0:
        raise ConfigError(
            f"{source}: features.pretrained needs a word embedding: set features.word_dim to "
            "the vectors' size"
        )


def check_part_dropout(
    dropout: PartDropoutConfig, features: FeaturesConfig | None, source: str
) -> None:
    """A rate for a part that is not there is a mistake, not a no-op."""
    present = {
        "words": features is not None and features.word_dim > 0,
        "chars": features is not None and features.char_encoder != "none",
        "casing": features is not None and features.casing_dim > 0,
    }
    for part, there in present.items():
        if getattr(dropout, part) > 0 and not there:
            raise ConfigError(
                f"{source}: part_dropout.{part} is set, but the features have no {part} part"
            )


def check_layers(layers: str | list[int], source: str) -> None:
    if isinstance(layers, str) and layers not in ("all", "every_other"):
        raise ConfigError(
            f"{source}: layer_pooling.layers must be 'all', 'every_other' or a list of layer "
            f"numbers, got {layers!r}"
        )


def check_labels(
    kind: str, data: TextDataConfig, regression: RegressionConfig, source: str
) -> None:
    columns = data.label_columns
    if not columns:
        raise ConfigError(f"{source}: data.label_columns must name at least one column")
    classifies = kind not in REGRESSION_KINDS
    if classifies and len(columns) != 1:
        raise ConfigError(
            f"{source}: classification takes one label column, got {len(columns)}: {columns}"
        )
    if classifies and regression.calibrate:
        raise ConfigError(f"{source}: regression.calibrate is for regressors, not a {kind}")


# (key, lowest allowed, whether the lowest is allowed, highest allowed or None)
_RANGES = [
    ("data.dev_fraction", 0.0, False, 1.0),
    ("features.word_dim", 0, True, None),
    ("features.min_freq", 1, True, None),
    ("features.pretrained_max_words", 0, True, None),
    ("features.casing_dim", 0, True, None),
    ("features.unk_replace", 0.0, True, 1.0),
    ("features.char_dim", 1, True, None),
    ("features.char_hidden", 1, True, None),
    ("encoder.hidden_size", 1, True, None),
    ("encoder.num_layers", 1, True, None),
    ("encoder.dropout", 0.0, True, 0.99),
    ("optimizer.lr", 0.0, False, None),
    ("optimizer.lr_decay", 0.0, True, None),
    ("optimizer.grad_clip", 0.0, True, None),
    ("train.batch_size", 1, True, None),
    ("train.max_epochs", 1, True, None),
    ("train.patience", 1, True, None),
    ("train.checkpoint_every", 0, True, None),
    ("encoder.outer_dropout", 0.0, True, 0.99),
    ("train.eval_batch_size", 1, True, None),
    ("pooling.attention_size", 1, True, None),
    ("optimizer.warmup_fraction", 0.0, True, 1.0),
    ("head.stream_lag", 0, True, None),
    ("data.max_length", 2, True, None),
    ("backbone.max_length", 8, True, None),
    ("backbone.stride", 0, True, None),
    ("backbone.lr", 0.0, False, None),
    ("backbone.batch_size", 1, True, None),
    ("layer_pooling.lstm_hidden", 1, True, None),
    ("layer_pooling.dropout", 0.0, True, 0.99),
    ("layer_pooling.start_layer", 1, True, None),
    ("layer_mix.lstm_hidden", 1, True, None),
    ("part_dropout.transformer", 0.0, True, 0.99),
    ("part_dropout.words", 0.0, True, 0.99),
    ("part_dropout.chars", 0.0, True, 0.99),
    ("part_dropout.casing", 0.0, True, 0.99),
]


def check_ranges(config: ExperimentConfig, source: str) -> None:
    """Reject values that would only fail later, deep inside torch."""
    for key, low, inclusive, high in _RANGES:
        section, name = key.split(".")
        value = getattr(getattr(config, section, None), name, None)
        if value is None:
            continue
        too_low = value < low if inclusive else value <= low
        if too_low or (high is not None and value > high):
            bound = f"{'>=' if inclusive else '>'} {low}" + (f" and <= {high}" if high else "")
            raise ConfigError(f"{source}: {key} must be {bound}, got {value!r}")


def _build(cls: type, data: Any, source: str, prefix: str, base: Any = None) -> Any:
    """``cls`` from ``data``; keys it leaves out keep ``base``'s values (a section's defaults
    for the config's kind: a layer classifier's ``optimizer: {lr: ...}`` stays AdamW), or the
    class defaults where there is no base."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {prefix.rstrip('.') or 'config'} must be a mapping")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key {prefix + unknown[0]!r} (known: {', '.join(sorted(fields))})"
        )
    values = {}
    for name, value in data.items():
        hint = hints[name]
        section = _section_class(hint)
        if section is not None and value is None and hint is not section:
            values[name] = None  # an optional section left out
        elif section is not None:
            inner = getattr(base, name) if base is not None else _default(fields[name])
            values[name] = _build(section, value, source, f"{prefix}{name}.", inner)
        else:
            values[name] = _check_value(hint, value, source, f"{prefix}{name}")
    return dataclasses.replace(base, **values) if base is not None else cls(**values)


def _section_class(hint: Any) -> type | None:
    """The dataclass a field holds (``Section`` or an optional ``Section | None``), if any."""
    if dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        (section, *rest) = [a for a in typing.get_args(hint) if a is not type(None)]
        if not rest and dataclasses.is_dataclass(section):
            return section
    return None


def _default(field_: dataclasses.Field) -> Any:
    """A field's default value (its factory called), or None when it has none."""
    if field_.default_factory is not dataclasses.MISSING:
        return field_.default_factory()
    return None if field_.default is dataclasses.MISSING else field_.default


def _check_value(hint: Any, value: Any, source: str, key: str) -> Any:
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list) or not all(
            isinstance(v, item) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(f"{source}: {key} must be a list of {item.__name__}s, got {value!r}")
        return value
    if origin is Literal:
        if value not in typing.get_args(hint):
            choices = ", ".join(repr(c) for c in typing.get_args(hint))
            raise ConfigError(f"{source}: {key} must be one of {choices}, got {value!r}")
        return value
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        real = [o for o in options if o is not type(None)]
        for option in real[:-1]:
            try:
                return _check_value(option, value, source, key)
            except ConfigError:
                continue
        return _check_value(real[-1], value, source, key)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):
        # YAML 1.1 reads 5e-5 (no dot) as a string; users mean the number.
        try:
            return float(value)
        except ValueError:
            pass
    if hint in (int, float, str, bool) and not (
        isinstance(value, hint) and not (hint is int and isinstance(value, bool))
    ):
        raise ConfigError(f"{source}: {key} must be {hint.__name__}, got {value!r}")
    return value
