"""Train a recurrent sequence tagger: read CoNLL data, build vocabularies and the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bistack.api.tagger import Tagger
from bistack.api.tagging import check_known_types
from bistack.config import LayerPoolingTaggerConfig, TaggerConfig
from bistack.data.batching import TaggingBatch, collate_tagging
from bistack.data.conll import Sentence, read_conll
from bistack.data.features import EncodedSentence
from bistack.data.splits import read_train_and_dev
from bistack.metrics.entities import EntityScores
from bistack.models.tagger import build_tagger
from bistack.recipes.driver import Metric, Prepared
from bistack.recipes.features import build_vocabularies, initialise_words, singleton_mask
from bistack.recipes.loop import Evaluation, Run
from bistack.schemes import convert_tags, detect_scheme

DEV_F1 = Metric("dev_f1", "dev F1", higher_is_better=True)


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
    split = read_train_and_dev(
        lambda path: read_conll(path, data.token_column, data.tag_column), data
    )
    scheme = detect_scheme([s.tags for s in split.train])
    return TaggingData(split.train, split.dev, scheme, split.dev_source)


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
        self, tagger: Tagger, encoded: list[EncodedSentence], data: TaggingData, run: Run
    ) -> None:
        self.tagger = tagger
        self.encoded = encoded
        self.data = data

    def train_lengths(self) -> Sequence[int]:
        return [len(e.words) for e in self.encoded]

    def collate(self, indices: list[int]) -> TaggingBatch:
        return collate_tagging([self.encoded[i] for i in indices], self.tagger.vocabularies)

    def evaluate(self) -> Evaluation:
        return tagging_evaluation(self.tagger.score(self.data.dev, self.data.dev_source))

    def save_weights(self, directory: Path) -> None:
        self.tagger.save_weights(directory)


def prepare_tagger(config: TaggerConfig, run: Run) -> Prepared:
    """The recurrent tagger ``config`` describes, sized to its training data."""
    data = load_tagging_data(config)
    pairs = [(s.tokens, convert_tags(s.tags, config.data.scheme)) for s in data.train]
    vocabularies = build_vocabularies(config.features, pairs)
    check_known_types(data.dev, vocabularies.tags.items, data.dev_source)
    model = build_tagger(config, vocabularies, singletons=singleton_mask(vocabularies, pairs))
    run.say(initialise_words(model.embedder, config.features, vocabularies))
    tagger = Tagger(model, vocabularies, config, data.input_scheme)
    encoded = [vocabularies.encode(*pair) for pair in pairs]
    return Prepared(
        model=tagger,
        network=model,
        loop=TaggingTask(tagger, encoded, data, run),
        summary=(
            f"train: {len(data.train)} sentences ({data.input_scheme}, trained as "
            f"{config.data.scheme}); dev: {len(data.dev)} from {data.dev_source}; "
            f"{len(vocabularies.words)} words, {len(vocabularies.chars)} chars, "
            f"{len(vocabularies.tags)} tags"
        ),
    )
