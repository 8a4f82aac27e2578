"""Train a causal LSTM language model on a plain-text file; early stopping on dev perplexity."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bistack.api.language_model import BOS, EOS, LanguageModel
from bistack.config import LanguageModelConfig
from bistack.data.corpus import read_corpus
from bistack.data.splits import split_off_dev
from bistack.data.vocab import Vocabulary
from bistack.models.language_model import LMBatch, build_language_model, collate_lm
from bistack.recipes.loop import Evaluation, fit, start_run

TRAIN_PERPLEXITY_SAMPLE = 2000  # training sequences re-scored each epoch (teacher-forced)


class LanguageModelTask:
    def __init__(
        self,
        model: LanguageModel,
        train: list[list[str]],
        dev: list[list[str]],
        model_dir: Path,
    ) -> None:
        self.model = model
        self.train = train
        self.encoded = [model.encode(s) for s in train]
        self.dev = dev
        self.model_dir = model_dir

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

    def save_weights(self) -> None:
        self.model.save(self.model_dir)


def train_language_model(
    config: LanguageModelConfig,
    output: str | Path,
    *,
    devices: int | str = 1,
    strategy: str = "auto",
    accelerator: str = "cpu",
    progress: bool = True,
) -> Path:
    """Train as ``config`` says; the best model goes to ``output/model``. Returns that path."""
    run = start_run(
        output, config.train.seed, devices=devices, strategy=strategy, accelerator=accelerator
    )
    data = config.data
    train = read_corpus(data.train, data.tokenizer, data.max_length)
    if data.dev:
        dev, dev_source = read_corpus(data.dev, data.tokenizer, data.max_length), data.dev
    else:
        train, dev = split_off_dev(train, data.dev_fraction, data.split_seed)
        dev_source = f"{data.train} (held-out {data.dev_fraction:.0%} of the lines)"
    key = str.lower if config.features.lowercase else str
    words = Vocabulary.build((key(t) for s in train for t in s), config.features.min_freq)
    vocabulary = Vocabulary([BOS, EOS, *(w for w in words.items[2:] if w not in (BOS, EOS))])
    network = build_language_model(config, len(vocabulary))
    model = LanguageModel(network, vocabulary, config)
    run.say(
        f"language model: {len(train)} train sequences, {len(dev)} dev from {dev_source}; "
        f"{len(vocabulary)} words; {sum(p.numel() for p in network.parameters()):,} parameters"
        + ("; bidirectional: LEAKS the next token (allow_leakage)" if config.allow_leakage else "")
    )
    if run.fabric.is_global_zero:
        model.save_metadata(run.model_dir)
    task = LanguageModelTask(model, train, dev, run.model_dir)
    result = fit(run, network, task, config.train, config.optimizer, progress=progress)
    run.say(
        f"best dev perplexity {-result.best_score:.2f} at epoch {result.best_epoch}; "
        f"model in {run.model_dir}"
    )
    return run.model_dir
