"""Train a recurrent sequence tagger: read CoNLL data, build vocabularies and the model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bistack.data.batching import TaggingBatch, collate_tagging
from bistack.data.conll import Sentence
from bistack.data.features import EncodedSentence
from bistack.data.spans import SpanReport
from bistack.data.splits import read_train_and_dev
from bistack.data.tagged import read_tagged
from bistack.metrics.dev import Evaluation
from bistack.metrics.entities import EntityScores
from bistack.runs.driver import Prepared
from bistack.runs.loop import Run
from bistack.runs.vocabularies import build_vocabularies, initialise_words, singleton_mask
from bistack.schemes import PLAIN, convert_tags, detect_scheme
from bistack.taggers.config import LayerPoolingTaggerConfig, TaggerConfig
from bistack.taggers.emissions.calibration import calibrate, check_consistency, dev_emissions
from bistack.taggers.models.tagger import Tagger
from bistack.taggers.networks.network import build_tagger

if TYPE_CHECKING:
    from bistack.taggers.models.layer_tagger import LayerPoolingTagger
from bistack.taggers.models.tagging import Emitter, check_gold_tags

T = TypeVar("T", "Tagger", "LayerPoolingTagger")


@dataclass
class TaggingData:
    """Training and dev sentences (tags in the input scheme), that scheme, and what reading
    them found worth saying (spans widened to token boundaries); ``calibrate_on_dev``: as
    ``TrainAndDev``'s (false for a cross-validation's held-out fold)."""

    train: list[Sentence]
    dev: list[Sentence]
    input_scheme: str
    dev_source: str
    notes: list[str]
    calibrate_on_dev: bool = True


def load_tagging_data(config: TaggerConfig | LayerPoolingTaggerConfig) -> TaggingData:
    """Read train and dev; without a dev file, split off a fixed fraction of train."""
    data = config.data
    report = SpanReport()
    split = read_train_and_dev(lambda path: read_tagged(path, data, report), data)
    plain = data.scheme == PLAIN
    scheme = PLAIN if plain else detect_scheme([s.tags for s in split.train])
    notes = [
        f"span on line {line} widened to token boundaries: {written!r} -> {widened!r}"
        for line, written, widened in report.snapped
    ]
    return TaggingData(split.train, split.dev, scheme, split.dev_source, notes)


def tagging_evaluation(scores: EntityScores, plain: bool = False) -> Evaluation:
    """Early stopping maximises dev entity F1 (conlleval's micro average); for plain tags
    (parts of speech), per-token accuracy, which is also their micro-averaged F1."""
    micro = scores.micro
    if plain:
        return Evaluation(
            score=micro.f1,
            metrics={"dev_f1": micro.f1, "dev_token_accuracy": scores.token_accuracy},
            summary=f"dev accuracy {scores.token_accuracy:.2f}",
        )
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
        plain = self.tagger.output_scheme == PLAIN
        return tagging_evaluation(self.tagger.score(self.data.dev, self.data.dev_source), plain)

    def save_weights(self, directory: Path) -> None:
        self.tagger.save_weights(directory)


def card_notes(config: TaggerConfig | LayerPoolingTaggerConfig) -> tuple[str, ...]:
    """What the model card says of a tagger beyond its dev scores: one that keeps document
    consistency (``head.document_consistency``) predicts otherwise than its dev scores read."""
    threshold = config.head.document_consistency
    if not threshold:
        return ()
    return (
        f"**Document consistency** at {threshold:g}: an entity less sure than that takes the "
        "type the same words carry, at least that sure, elsewhere in its document. The dev "
        "scores above read each sentence alone; `bistack evaluate` and every prediction apply "
        "it, and `config.json`'s `calibration.consistency_dev` says what it did to dev.",
    )


def finish_tagger(
    load: Callable[[Path], T],
    data: TaggingData,
    run: Run,
    emitter: Callable[[T], Emitter | None] | None = None,
) -> None:
    """Fit the best model's temperature on dev (``bistack.taggers.emissions.calibration``), then,
    where
    the config asks for it, measure document consistency over the calibrated confidences, and
    keep both with the model; ``emitter``: the best model's emissions from cached features, if
    any. Where dev may not be fitted on (a cross-validation's held-out fold), no temperature:
    the threshold alone is kept, measured on dev."""
    best = load(run.model_dir)
    if best.output_scheme == PLAIN:  # plain tags have no entities to be sure of
        return
    dev = dev_emissions(best, data.dev, None if emitter is None else emitter(best))
    if not data.calibrate_on_dev:
        run.say("entity confidences as trained: dev is the held-out fold, fitted on by nothing")
    elif (fit := calibrate(best, data.dev, dev=dev)) is None:
        run.say(
            "entity confidences kept as trained: the entities predicted on dev are all "
            "right (or all wrong, or none), so there is nothing to fit a temperature on"
        )
    else:
        if fit.kept:
            best.calibration = fit.to_json()
        run.say(fit.summary())
    threshold = best.config.head.document_consistency
    if threshold:
        check = check_consistency(dev, best.decoder, data.dev, threshold)
        best.calibration = best.calibration | check.to_json()
        run.say(check.summary())
    if best.calibration:
        best.save_metadata(run.model_dir)


def prepare_tagger(config: TaggerConfig, run: Run, data: TaggingData | None = None) -> Prepared:
    """The recurrent tagger ``config`` describes, sized to its training data; ``data``: train
    and dev sentences already chosen (cross-validation's folds)."""
    data = data or load_tagging_data(config)
    for note in data.notes:
        run.say(note)
    pairs = [(s.tokens, convert_tags(s.tags, config.data.scheme)) for s in data.train]
    vocabularies, vectors = build_vocabularies(config.features, pairs)
    check_gold_tags(data.dev, vocabularies.tags.items, config.data.scheme, data.dev_source)
    model = build_tagger(config, vocabularies, singletons=singleton_mask(vocabularies, pairs))
    train_tokens = (t for s in data.train for t in s.tokens)
    dev_tokens = (t for s in data.dev for t in s.tokens)
    run.say(
        initialise_words(
            model.embedder, config.features, vocabularies, vectors, train_tokens, dev_tokens
        )
    )
    tagger = Tagger(model, vocabularies, config, data.input_scheme)
    encoded = [vocabularies.encode(*pair) for pair in pairs]
    return Prepared(
        model=tagger,
        network=model,
        loop=TaggingTask(tagger, encoded, data, run),
        finish=lambda run: finish_tagger(Tagger.load, data, run),
        notes=card_notes(config),
        summary=(
            f"train: {len(data.train)} sentences ({data.input_scheme}, trained as "
            f"{config.data.scheme}); dev: {len(data.dev)} from {data.dev_source}; "
            f"{len(vocabularies.words)} words, {len(vocabularies.chars)} chars, "
            f"{len(vocabularies.tags)} tags"
        ),
    )
