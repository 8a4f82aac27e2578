"""Train a sequence tagger: read CoNLL data, build vocabularies and the model, run the loop."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bistack.api.tagger import Tagger, check_known_types
from bistack.config import LayerPoolingTaggerConfig, TaggerConfig
from bistack.data.batching import TaggingBatch, collate_tagging
from bistack.data.conll import Sentence, read_conll
from bistack.data.features import EncodedSentence
from bistack.data.splits import split_off_dev
from bistack.metrics.entities import EntityScores
from bistack.models.tagger import build_tagger
from bistack.recipes.features import build_vocabularies, prepare_embedder
from bistack.recipes.loop import Evaluation, fit, start_run
from bistack.schemes import convert_tags, detect_scheme


@dataclass
class TaggingData:
    """Training and dev sentences (tags in the input scheme) and that scheme."""

    train: list[Sentence]
    dev: list[Sentence]
    input_scheme: str
    dev_source: str


def load_tagging_data(config: TaggerConfig | LayerPoolingTaggerConfig) -> TaggingData:
    """Read train and dev; without a dev file, split off a fixed fraction of train."""
    data = config.data
    train = read_conll(data.train, data.token_column, data.tag_column)
    if data.dev:
        dev, dev_source = read_conll(data.dev, data.token_column, data.tag_column), data.dev
    else:
        train, dev = split_off_dev(train, data.dev_fraction, data.split_seed)
        dev_source = f"{data.train} (held-out {data.dev_fraction:.0%})"
    return TaggingData(train, dev, detect_scheme([s.tags for s in train]), dev_source)


def tagging_evaluation(scores: EntityScores) -> Evaluation:
    """Early stopping maximises dev entity F1 (conlleval's micro average)."""
    micro = scores.micro
    return Evaluation(
        score=micro.f1,
        metrics={
            "dev_precision": micro.precision,
            "dev_recall": micro.recall,
            "dev_f1": micro.f1,
            "dev_token_accuracy": scores.token_accuracy,
        },
        summary=f"dev P {micro.precision:.2f} R {micro.recall:.2f} F1 {micro.f1:.2f}",
    )


class TaggingTask:
    """What the training loop needs for tagging: batches, dev scoring, saving."""

    def __init__(
        self, tagger: Tagger, encoded: list[EncodedSentence], data: TaggingData, model_dir: Path
    ) -> None:
        self.tagger = tagger
        self.encoded = encoded
        self.data = data
        self.model_dir = model_dir

    def train_lengths(self) -> Sequence[int]:
        return [len(e.words) for e in self.encoded]

    def collate(self, indices: list[int]) -> TaggingBatch:
        return collate_tagging([self.encoded[i] for i in indices], self.tagger.vocabularies)

    def evaluate(self) -> Evaluation:
        return tagging_evaluation(self.tagger.score(self.data.dev, self.data.dev_source))

    def save_weights(self) -> None:
        self.tagger.save_weights(self.model_dir)


def train_tagger(
    config: TaggerConfig,
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
    fabric, say, model_dir = run.fabric, run.say, run.model_dir
    data = load_tagging_data(config)
    pairs = [(s.tokens, convert_tags(s.tags, config.data.scheme)) for s in data.train]
    vocabularies = build_vocabularies(config.features, pairs)
    check_known_types(data.dev, vocabularies.tags.items, data.dev_source)
    model = build_tagger(config, vocabularies)
    say(prepare_embedder(model, config, vocabularies, pairs))
    tagger = Tagger(model, vocabularies, config, data.input_scheme)
    say(
        f"train: {len(data.train)} sentences ({data.input_scheme}, trained as "
        f"{config.data.scheme}); dev: {len(data.dev)} from {data.dev_source}; "
        f"{len(vocabularies.words)} words, {len(vocabularies.chars)} chars, "
        f"{len(vocabularies.tags)} tags; {sum(p.numel() for p in model.parameters()):,} parameters"
    )
    if fabric.is_global_zero:
        tagger.save_metadata(model_dir)
    task = TaggingTask(tagger, [vocabularies.encode(*pair) for pair in pairs], data, model_dir)
    result = fit(run, model, task, config.train, config.optimizer, progress=progress)
    say(f"best dev F1 {result.best_score:.2f} at epoch {result.best_epoch}; model in {model_dir}")
    return model_dir
