"""The tagging family's config: tagged data, the tagging head, and the two taggers' top-level
configs (a recurrent tagger; a tagger over a transformer's word states)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

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
)
from bistack.errors import ConfigError

RANGES: tuple[Range, ...] = (
    *SHARED_RANGES,
    ("head.stream_lag", 0, True, None),
    ("head.document_consistency", 0.0, True, 1.0),
    ("layer_mix.lstm_hidden", 1, True, None),
)


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
class LayerMixConfig:
    """How a word's states in every transformer layer become one vector."""

    # weighted: a learned softmax mix of the layers (ScalarMix, the same for every word);
    # lstm: a BiLSTM over the word's layers, shallow to deep, its two final states;
    # concat_last4: the last four layers side by side (4 x hidden; BERT paper, Table 7);
    # concat_all: every layer side by side (num_layers x hidden).
    type: Literal["weighted", "lstm", "concat_last4", "concat_all"] = "weighted"
    lstm_hidden: int = 128  # lstm: hidden size per direction


@dataclass
class HeadConfig:
    type: Literal["crf", "softmax"] = "crf"  # CRF constrained to the scheme, or per-token softmax
    # Streaming (``bistack predict --stream``), CRF only: commit each tag this many tokens after
    # its token arrives; 0 is greedy, and a lag at least the sentence length is exact Viterbi.
    stream_lag: int = 0
    # Document consistency, entity schemes only (bistack.taggers.emissions.consistency): after
    # training,
    # an entity the tagger is less than this sure of (its calibrated probability) takes the type
    # that the same words carry, at least this sure, elsewhere in its document. 0: off.
    document_consistency: float = 0.0


@dataclass
class TaggerConfig(ExperimentConfig):
    """Everything needed to train (and rebuild) a sequence tagger."""

    RANGES: ClassVar[tuple[Range, ...]] = RANGES
    SUMMARY_KEYS: ClassVar[tuple[str, ...]] = ("features", "encoder", "head")
    INPUT_KEYS: ClassVar[tuple[str, ...]] = (*ExperimentConfig.INPUT_KEYS, "features.pretrained")

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
class LayerPoolingTaggerConfig(OverBackbone, ExperimentConfig):
    """A tagger over a transformer's word-level states: the layers of each word mixed into one
    vector, optionally stacked with the word's own features (word embedding, characters,
    casing), then the recurrent encoder and the CRF of a recurrent tagger."""

    RANGES: ClassVar[tuple[Range, ...]] = RANGES
    SUMMARY_KEYS: ClassVar[tuple[str, ...]] = (
        "features",
        "encoder",
        "head",
        "backbone",
        "layer_mix",
    )
    INPUT_KEYS: ClassVar[tuple[str, ...]] = (
        *ExperimentConfig.INPUT_KEYS,
        "features.pretrained",
        "backbone.path",
    )
    HUB_KEYS: ClassVar[tuple[str, ...]] = ("backbone.path",)

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
        self.backbone.check(source)


def check_tagging_data(data: DataConfig, source: str) -> None:
    from bistack.data.tagged import tagged_format

    files = [data.train, *([data.dev] if data.dev else [])]
    if data.scheme == "none" and any(tagged_format(f, data.format) == "spans" for f in files):
        raise ConfigError(
            f"{source}: data.scheme none has no entities, and span files hold only entities; "
            "choose IOB1, BIO or BIOES for span files"
        )
