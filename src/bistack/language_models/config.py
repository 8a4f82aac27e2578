"""The language model's config: a plain-text corpus and a causal encoder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from bistack.config import (
    SHARED_RANGES,
    EncoderConfig,
    ExperimentConfig,
    FeaturesConfig,
    OptimizerConfig,
    Range,
    SplitConfig,
    TrainConfig,
)
from bistack.errors import ConfigError


@dataclass
class CorpusConfig(SplitConfig):
    """A plain text file, one sentence or paragraph per line, for language modelling."""

    # whitespace: tokens between spaces; text: English words and punctuation; spacy:NAME or
    # hf:FOLDER as a tagger's data.tokenizer
    tokenizer: str = "whitespace"
    max_length: int = 64  # tokens per training sequence; longer lines are cut into pieces


@dataclass
class LanguageModelConfig(ExperimentConfig):
    """A causal LSTM language model: next-token prediction, perplexity, sampling.

    Causal by definition: a bidirectional encoder is refused (it would read the token it must
    predict) unless ``allow_leakage`` is set, which only a demonstration of that leakage does.
    """

    RANGES: ClassVar[tuple[Range, ...]] = (*SHARED_RANGES, ("data.max_length", 2, True, None))
    SUMMARY_KEYS: ClassVar[tuple[str, ...]] = ("features", "encoder")
    INPUT_KEYS: ClassVar[tuple[str, ...]] = (*ExperimentConfig.INPUT_KEYS, "features.pretrained")

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
