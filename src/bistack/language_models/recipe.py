"""Train a causal LSTM language model on a plain-text file; early stopping on dev perplexity."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bistack.data.corpus import read_corpus
from bistack.data.splits import read_train_and_dev
from bistack.data.vocab import Vocabulary
from bistack.language_models.config import LanguageModelConfig
from bistack.language_models.model import BOS, EOS, LanguageModel
from bistack.language_models.network import LMBatch, build_language_model, collate_lm
from bistack.metrics.dev import Evaluation
from bistack.runs.driver import Prepared
from bistack.runs.loop import Run

TRAIN_PERPLEXITY_SAMPLE = 2000  # training sequences re-scored each epoch (teacher-forced)


class LanguageModelTask:
    def __init__(
        self,
        model: LanguageModel,
        train: list[list[str]],
        dev: list[list[str]],
    ) -> None:
        self.model = model
        self.train = train
        self.encoded = [model.encode(s) for s in train]
        self.dev = dev

    def train_lengths(self) -> Sequence[int]:
        return [len(e) for e in self.encoded]

    def collate(self, indices: list[int]) -> LMBatch:
        return collate_lm([self.encoded[i] for i in indices])

    def evaluate(self) -> Evaluation:
        dev = self.model.perplexity(self.dev)["perplexity"]
        train = self.model.perplexity(self.train[:TRAIN_PERPLEXITY_SAMPLE])["perplexity"]
        return Evaluation(
            score=-dev,
            metrics={"dev_perplexity": dev, "train_perplexity": train},
            summary=f"dev perplexity {dev:.2f} (train {train:.2f})",
        )

    def save_weights(self, directory: Path) -> None:
        self.model.save_weights(directory)


def prepare_language_model(config: LanguageModelConfig, run: Run) -> Prepared:
    """The causal language model ``config`` describes, with a vocabulary of its corpus."""
    data = config.data
    split = read_train_and_dev(
        lambda path: read_corpus(path, data.tokenizer, data.max_length), data
    )
    key = str.lower if config.features.lowercase else str
    words = Vocabulary.build((key(t) for s in split.train for t in s), config.features.min_freq)
    vocabulary = Vocabulary([BOS, EOS, *(w for w in words.items[2:] if w not in (BOS, EOS))])
    network = build_language_model(config, len(vocabulary))
    model = LanguageModel(network, vocabulary, config)
    leaks = "; bidirectional: LEAKS the next token (allow_leakage)" if config.allow_leakage else ""
    return Prepared(
        model=model,
        network=network,
        loop=LanguageModelTask(model, split.train, split.dev),
        summary=(
            f"language model: {len(split.train)} train sequences, {len(split.dev)} dev from "
            f"{split.dev_source}; {len(vocabulary)} words{leaks}"
        ),
    )
