"""What cross-validation (``bistack.cv``) does with a tagger's sentences:
split them by document (a CoNLL document's sentences never separated) or, in a file of one
document, stratified by the rarest entity type each sentence holds; train each fold on its
sentences; tag each fold's held-out sentences as ``predict`` writes them; pool the tags and
score them as conlleval does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

from bistack.data.conll import Sentence
from bistack.data.tagged import read_tagged
from bistack.errors import ConfigError, DataError
from bistack.folds.contract import (
    JSON,
    EnsembleFit,
    FoldFamily,
    HeldOut,
    OpenModel,
    OutOfFold,
    Say,
    number,
)
from bistack.folds.plan import FoldPlan
from bistack.folds.settings import CVSettings
from bistack.folds.splitters import SplitKeys
from bistack.metrics.entities import EntityScores
from bistack.schemes import PLAIN, detect_scheme, spans_from_tags
from bistack.taggers.config import LayerPoolingTaggerConfig, TaggerConfig
from bistack.taggers.ensembles.held_out import HELD_OUT_FILE, load_held_out, save_held_out
from bistack.taggers.ensembles.oof_tags import out_of_fold_report, write_oof_files
from bistack.taggers.ensembles.potentials import (
    POTENTIALS_FILE,
    out_of_fold_potentials,
)
from bistack.taggers.ensembles.records import (
    OutOfFoldTagging,
    SentenceTagging,
    TaggedHeldOut,
    TaggerFold,
    TaggerShared,
    tagging_of,
)
from bistack.taggers.models.tagging import EmissionBatch, Emitter, Tagging, score_sentences
from bistack.taggers.recipe import TaggingData

if TYPE_CHECKING:
    from bistack.cards import Card
    from bistack.taggers.emissions.calibration import DevEmissions
    from bistack.taggers.models.layer_tagger import LayerPoolingTagger

NO_ENTITY = "no entity"
TaggerConfigs = TaggerConfig | LayerPoolingTaggerConfig


class TaggerFolds:
    """Cross-validation of a tagger's ``config`` (``open_model``: the door's opener of a saved
    model of ``card``'s kind, ``open_model(folder, parts)``)."""

    OOF_FILES: ClassVar[tuple[str, ...]] = ("oof.jsonl", "oof.conll", POTENTIALS_FILE)
    FOLD_FILES: ClassVar[tuple[str, ...]] = (HELD_OUT_FILE,)
    ROWS_ARE: ClassVar[str] = "sentences"

    @classmethod
    def of(cls, config: TaggerConfigs, card: Card, open_model: OpenModel) -> Self:
        """The family of ``config`` (its card chose the class: a layer tagger's shares its
        backbone's word states); its fold models open as the door opens them."""
        return cls(config, open_model)

    def __init__(self, config: TaggerConfigs, open_model: OpenModel) -> None:
        self.config = config
        self.open_model = open_model
        # Caches of this process's CV, never results: what ``shared`` gave (kept for the
        # ensemble), and each fold's model and emissions of its held-out sentences.
        self._shared: TaggerShared | None = None
        # Each fold's model and its emissions of its held-out sentences, by those sentences'
        # rows, kept where the fold was trained in this process (see ``predict_held_out``).
        self._held: dict[tuple[int, ...], tuple[Tagging, DevEmissions]] = {}
        data = config.data
        self.rows: list[Sentence] = read_tagged(data.train, data)
        if not self.rows:
            raise DataError(data.train, "no sentences found")
        tags = [s.tags for s in self.rows]
        self.scheme = PLAIN if data.scheme == PLAIN else detect_scheme(tags)

    def refuse_settings(self, settings: CVSettings) -> None:
        """Repeats (one analysis a sentence), and a time split (a tagger's sentences are split
        by document)."""
        if settings.seeded:
            raise ConfigError("a tagger's CV splits by document; it has no dev split of seeds")
        if settings.split == "time":
            raise ConfigError(
                "--split time splits a table's rows in time; a tagger's sentences are split by "
                "document (--split auto or plain)"
            )
        if settings.repeats > 1:
            raise ConfigError(
                f"--repeats {settings.repeats}: a tagger's out-of-fold tags are one analysis a "
                "sentence, which repeats cannot average; run one repeat a seed (data.split_seed)"
            )

    def row_content(self, row: int) -> list[object]:
        sentence = self.rows[row]
        return [list(sentence.tokens), list(sentence.tags)]

    def split_keys(self) -> SplitKeys:
        """By document when the file has several (always, whatever ``--split``: a document's
        sentences share names and context), else by each sentence's rarest entity type
        (nothing, for tags that are not entities)."""
        rows = len(self.rows)
        if len({s.document for s in self.rows}) > 1:
            return {
                "rows": rows,
                "groups": [f"{s.document}" for s in self.rows],
                "grouped_by": "document",
            }
        if self.scheme == PLAIN:
            return {"rows": rows}
        types = [{span.label for span in spans_from_tags(s.tags)} for s in self.rows]
        counts = Counter(kind for present in types for kind in present)
        strata = [
            min(present, key=lambda k: (counts[k], k)) if present else NO_ENTITY
            for present in types
        ]
        return {"rows": rows, "strata": strata, "stratified_by": "entity type"}

    def shared_inputs(self, say: Say) -> TaggerShared:
        """What every fold of a recurrent tagger shares: nothing (a layer tagger's family
        shares its frozen backbone's word states)."""
        if self._shared is None:
            self._shared = TaggerShared()
        return self._shared

    def training_inputs(
        self,
        train: list[int],
        dev: list[int],
        source: str,
        shared: TaggerShared,
        calibrate_on_dev: bool,
    ) -> dict[str, object]:
        rows = self.rows
        chosen = TaggingData(
            [rows[i] for i in train],
            [rows[i] for i in dev],
            self.scheme,
            source,
            [],
            calibrate_on_dev,
        )
        if shared.backbone is None:
            return {"data": chosen}
        return {
            "data": chosen,
            "backbone": shared.backbone,
            "word_states_of": shared.word_states_of,
        }

    @staticmethod
    def model_parts(shared: TaggerShared) -> dict[str, object]:
        """What a fold model opens with: the shared backbone (the word states are training's)."""
        return {} if shared.backbone is None else {"backbone": shared.backbone}

    def predict_held_out(
        self, model: Tagging, held: list[int], shared: TaggerShared, key: str, directory: Path
    ) -> HeldOut[TaggedHeldOut]:
        """The fold model's tagging of its held-out sentences (each as ``predict`` writes it)
        and its scores. Its network reads them once: their emissions are kept, with the
        model, for the calibration fits that follow in this process, and saved in
        ``directory`` for those that follow in another."""
        from bistack.taggers.emissions.calibration import dev_emissions

        sentences = [self.rows[i] for i in held]
        emissions = dev_emissions(model, sentences, self.shared_emitter(model, sentences, shared))
        save_held_out(directory / HELD_OUT_FILE, model, emissions)
        self._held[tuple(held)] = (model, emissions)
        tagged = self.tagged(model, sentences, emissions)
        predicted = {i: list(t.sentences[0].tags) for i, t in zip(held, tagged, strict=True)}
        scores = self.scores(lambda index: predicted[index], held).to_json()
        tagging = TaggedHeldOut(
            [t.to_json() for t in tagged],
            [predicted[i] for i in held],
            model.labels,
            model.output_scheme,
        )
        return HeldOut(number(scores[key]), scores, tagging)

    @staticmethod
    def read_predictions(fields: JSON) -> TaggedHeldOut:
        """A fold's tagging of its held-out sentences as ``fold.json`` holds it."""
        predictions, tags, labels = fields["predictions"], fields["tags"], fields["labels"]
        if not all(isinstance(value, list) for value in (predictions, tags, labels)):
            raise TypeError("predictions, tags and labels: not lists")
        return TaggedHeldOut(predictions, tags, labels, str(fields["output_scheme"]))  # type: ignore[arg-type]

    @staticmethod
    def tagged(model: Tagging, sentences: Sequence[Sentence], emissions: DevEmissions) -> list[Any]:
        """``sentences`` tagged by ``model`` (at its calibration) from their ``emissions``."""
        return model.predict_tokens(
            [s.tokens for s in sentences],
            documents=[s.document for s in sentences],
            emitter=emissions.replayed(),
        )

    @staticmethod
    def shared_emitter(
        model: Tagging, sentences: Sequence[Sentence], shared: TaggerShared
    ) -> Emitter | None:
        """The emissions of ``sentences`` from the word states the folds share (a frozen
        backbone's, computed once for the file), or None: the model's own pass."""
        if shared.word_states_of is None:
            return None
        tagger = cast("LayerPoolingTagger", model)  # the folds share a frozen backbone's states
        return tagger.cached([s.tokens for s in sentences], shared.word_states_of(sentences))

    def scores(self, tags_of: Callable[[int], list[str]], rows: Sequence[int]) -> EntityScores:
        """Entity scores (or tag accuracy, for plain tags) of the tags ``tags_of(row)`` gives
        for ``rows``, as conlleval computes them."""
        chosen = [self.rows[i] for i in rows]

        def tag_tokens(tokens: object, documents: object = None) -> list[list[str]]:
            return [tags_of(row) for row in rows]  # the sentences of ``rows``, in order

        labels = sorted({t for i in rows for t in tags_of(i)} | {t for s in chosen for t in s.tags})
        return score_sentences(tag_tokens, labels, self.scheme, chosen, self.config.data.train)

    def pool_out_of_fold(
        self, plan: FoldPlan, records: list[TaggerFold], key: str
    ) -> OutOfFold[OutOfFoldTagging]:
        """Each row's record and fold, in the scheme the folds tag in, and the metric on the
        pooled out-of-fold tags."""
        oof: SentenceTagging = {}
        for (_, fold, _), record in zip(plan.runs(), records, strict=True):
            for row, prediction, tags in zip(record.held, *tagging_of(record), strict=True):
                oof[row] = (prediction, tags, fold)
        rows = list(range(len(self.rows)))
        score = number(self.scores(lambda row: oof[row][1], rows).to_json()[key])
        scheme = records[0].held_out.predictions.output_scheme
        return OutOfFold([score], OutOfFoldTagging(oof, scheme))

    def held_emissions(
        self, records: list[TaggerFold], members: dict[str, Path], say: Say
    ) -> dict[str, tuple[Tagging, DevEmissions]]:
        """Each fold's model and its emissions of its held-out sentences with their gold
        entities (``DevEmissions``, indices into the held-out list), by fold name: those kept
        when the fold was trained in this process; a fold trained in another (a worker, a Ray
        task, an earlier run) replayed from what it saved beside its model (``members``: each
        fold's model folder) without opening the model, or, where it saved nothing (a run of an
        earlier version), opened here and read once by its network."""
        from bistack.taggers.emissions.calibration import dev_emissions

        found = {}
        for record in records:
            key = tuple(record.held)
            model_dir = members[record.name]
            sentences = [self.rows[i] for i in record.held]
            if key not in self._held:
                saved: tuple[Tagging, DevEmissions] | None = load_held_out(
                    model_dir.parent / HELD_OUT_FILE, sentences, self.config
                )
                if saved is None:
                    shared = self.shared_inputs(say)
                    model = self.open_model(model_dir, self.model_parts(shared))
                    emitter = self.shared_emitter(model, sentences, shared)
                    saved = (model, dev_emissions(model, sentences, emitter))
                self._held[key] = saved
            found[record.name] = self._held[key]
        return found

    @property
    def calibrates(self) -> bool:
        """Whether a fold's tagger calibrates its confidences after training (a temperature;
        none for plain tags)."""
        return self.scheme != PLAIN

    def cross_fit(
        self,
        plan: FoldPlan,
        records: list[TaggerFold],
        key: str,
        members: dict[str, Path],
        say: Say,
    ) -> list[TaggerFold]:
        """Each fold's held-out sentences tagged again by its model at a temperature fitted on
        the other folds' held-out entities (each by the model that never saw it), never on its
        own; its scores again. ``records``: from uncalibrated models. Plain tags: nothing to
        fit."""
        if self.scheme == PLAIN:
            return records
        from bistack.taggers.emissions.calibration import pooled_temperature

        held = self.held_emissions(records, members, say)
        fitted = []
        for record in records:
            others = [r.name for r in records if r.name != record.name]
            temperature = pooled_temperature([(held[n][1], held[n][0].decoder) for n in others])
            model = held[record.name][0]
            sentences = [self.rows[i] for i in record.held]
            trained = model.calibration
            if temperature is not None:
                model.calibration = trained | {"temperature": temperature}
            try:  # the emissions read once, decoded again at the fitted temperature
                tagged = self.tagged(model, sentences, held[record.name][1])
            finally:
                model.calibration = trained
            tags = [list(t.sentences[0].tags) for t in tagged]
            scores = self.scores(
                dict(zip(record.held, tags, strict=True)).__getitem__, record.held
            ).to_json()
            calibration: JSON = {"fitted_on": others}
            if temperature is None:
                calibration["note"] = "no plausible temperature fits: confidences as trained"
            else:
                calibration["temperature"] = temperature
            trained_tagging = record.held_out.predictions
            tagging = replace(trained_tagging, predictions=[t.to_json() for t in tagged], tags=tags)
            fitted.append(
                record.cross_fitted(HeldOut(number(scores[key]), scores, tagging), calibration)
            )
        return fitted

    def ensemble_settings(
        self,
        fitted_on: OutOfFoldTagging,
        written: OutOfFoldTagging,
        members: dict[str, Path],
        records: list[TaggerFold],
        say: Say,
        members_calibrated: bool,
    ) -> EnsembleFit[OutOfFoldTagging]:
        """The ensemble's temperature, fitted on the out-of-fold marginals: each fold's member
        reads its held-out sentences (a frozen backbone's word states shared, as in training),
        their marginals decoded as the ensemble decodes its mean, the log-loss of each
        predicted entity's confidence minimised (as a tagger's is on dev); kept only where it
        makes held-out halves of the file better calibrated (the fit is recorded either way).
        Document consistency at the config's threshold, as each model keeps it, measured on
        the same out-of-fold sentences. ``written`` gains each sentence's log-potentials (what
        a blend weighs). Plain tags: none to fit, nor to blend."""
        if self.scheme == PLAIN:
            return EnsembleFit({}, "", written)
        from bistack.files.ensemble_dir import EnsembleMeta
        from bistack.taggers.emissions.calibration import DevEmissions, calibrate, check_consistency
        from bistack.taggers.ensembles.ensemble import TaggerEnsemble

        held_out = self.held_emissions(records, members, say)
        opened = [held_out[r.name][0] for r in records]
        names = [record.name for record in records]
        ensemble = TaggerEnsemble(opened, EnsembleMeta(self.config.kind, names, {}))
        batches = []
        for member, record in zip(opened, records, strict=True):
            held = record.held
            for batch in held_out[record.name][1].batches:
                logs = ensemble.log_mean_marginals([(member, batch.emissions)], batch.lengths)
                rows = [held[i] for i in batch.indices]
                batches.append(EmissionBatch(rows, batch.lengths, logs))
        labels = list(ensemble.decoder.labels)
        potentials = out_of_fold_potentials(records, held_out, labels, len(self.rows))
        gold = [{(s.start, s.end, s.label) for s in spans_from_tags(r.tags)} for r in self.rows]
        marginals = DevEmissions(batches, gold)
        fit = calibrate(ensemble, self.rows, dev=marginals)
        meta: JSON = {}
        notes = []
        if fit is None:
            notes.append(
                "entity confidences as the members give them: the out-of-fold entities are all "
                "right (or all wrong, or none), so there is nothing to fit a temperature on"
            )
        else:
            notes.append(fit.summary("the out-of-fold marginals", "the file"))
            how = "the out-of-fold marginals: the log-loss of each predicted entity's confidence"
            fitted = fit.to_json() | {"fitted_on": how, "kept": fit.kept}
            meta["out_of_fold_fit"] = fitted
            if fit.kept:
                ensemble.calibration = fitted
        threshold = self.config.head.document_consistency
        if threshold:  # as the config asks of each model: measured on what no member saw
            check = check_consistency(marginals, ensemble.decoder, self.rows, threshold)
            ensemble.calibration = ensemble.calibration | check.to_json()
            notes.append(check.summary("out of fold"))
        if ensemble.calibration:
            meta["calibration"] = ensemble.calibration
        return EnsembleFit(meta, "\n".join(notes), replace(written, potentials=potentials))

    def write_oof(self, output: Path, plan: FoldPlan, oof: OutOfFoldTagging) -> list[str]:
        """The out-of-fold files (``bistack.taggers.ensembles.oof_tags``); their names."""
        return write_oof_files(output, self.rows, oof)

    def oof_report(self, oof: OutOfFoldTagging, model_dir: Path) -> JSON | None:
        """The tagger's report of the out-of-fold tags and confidences."""
        return out_of_fold_report(self, oof, model_dir)


class LayerTaggerFolds(TaggerFolds):
    """Cross-validation of a tagger over a transformer's layers: a frozen backbone's word
    states of every sentence computed once for every fold."""

    def __init__(self, config: LayerPoolingTaggerConfig, open_model: OpenModel) -> None:
        super().__init__(config, open_model)
        self.layer_config = config

    def shared_inputs(self, say: Say) -> TaggerShared:
        """The backbone, and its word states of every sentence of the file (computed once,
        then read from the cache), each fold taking its sentences' rows, where the backbone is
        frozen; made once a process."""
        if self._shared is not None:
            return self._shared
        options = self.layer_config.frozen_backbone
        self._shared = TaggerShared()
        if options is not None:
            from bistack.models.backbone import TransformerBackbone
            from bistack.taggers.layer_recipe import WordStatesByLine, cached_word_states

            backbone = TransformerBackbone.load(options.path)
            states = cached_word_states(backbone, self.layer_config, self.rows, say)
            self._shared = TaggerShared(backbone, WordStatesByLine(self.rows, states))
        return self._shared


# The families the taggers' cards name, held to the contract by the type checker.
Family = FoldFamily[TaggedHeldOut, TaggerShared, Tagging, OutOfFoldTagging]
FAMILY: type[Family] = TaggerFolds
LAYER_FAMILY: type[Family] = LayerTaggerFolds
