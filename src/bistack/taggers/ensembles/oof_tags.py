"""What a tagger's cross-validation writes of its out-of-fold tags: ``oof.jsonl``, ``oof.conll``
and each sentence's log-potentials (a blend of tagger CVs weighs them), and the tagger's
report of them, read as the report reads a tagger (:class:`OutOfFoldTags`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from bistack.data.conll import Sentence
from bistack.files.formats import joined, json_line
from bistack.files.modeldir import atomic_write
from bistack.folds.contract import JSON
from bistack.metrics.entities import EntityScores
from bistack.schemes import PLAIN, spans_from_tags
from bistack.taggers.ensembles.potentials import POTENTIALS_FILE, save_potentials
from bistack.taggers.ensembles.records import OutOfFoldTagging
from bistack.taggers.models.records import SentenceAnalysis


class TaggedFile(Protocol):
    """What the report reads of a tagger's cross-validation (``TaggedFile``): its file's
    sentences, its config and scheme, and its scores of tags."""

    @property
    def rows(self) -> list[Sentence]: ...
    @property
    def config(self) -> Any: ...
    @property
    def scheme(self) -> str: ...

    def scores(self, tags_of: Callable[[int], list[str]], rows: Sequence[int]) -> EntityScores: ...


def write_oof_files(output: Path, rows: Sequence[Sentence], oof: OutOfFoldTagging) -> list[str]:
    """``oof.jsonl`` (each sentence as ``predict --format jsonl`` writes it, after its line,
    fold and gold tags), ``oof.conll`` (token, gold tag, predicted tag: conlleval's input),
    every sentence once, in the file's order, and (but for plain tags) each sentence's
    log-potentials, which a blend of tagger CVs weighs; their names."""
    lines, columns = [], []
    for row, sentence in enumerate(rows):
        prediction, tags, fold = oof.tagging[row]
        extra = {"line": sentence.line, "fold": fold, "gold": list(sentence.tags)}
        lines.append(json_line(joined(extra, prediction)))
        columns += [
            f"{t} {g} {p}\n" for t, g, p in zip(sentence.tokens, sentence.tags, tags, strict=True)
        ]
        columns.append("\n")
    text, conll = "".join(lines), "".join(columns)
    atomic_write(output / "oof.jsonl", lambda temporary: Path(temporary).write_text(text))
    atomic_write(output / "oof.conll", lambda temporary: Path(temporary).write_text(conll))
    found = oof.potentials
    if found is None:  # plain tags: no entities to weigh a blend by
        return ["oof.jsonl", "oof.conll"]
    save_potentials(
        output / POTENTIALS_FILE,
        found.sentences,
        found.folds,
        found.crfs,
        found.labels,
        found.scheme,
        found.output_scheme,
    )
    return ["oof.jsonl", "oof.conll", POTENTIALS_FILE]


def out_of_fold_report(folds: TaggedFile, oof: OutOfFoldTagging, model_dir: Path) -> JSON:
    """The tagger's report (as ``evaluate --report`` draws it) of the out-of-fold tags and
    confidences: each sentence tagged by the fold model that never saw it, an entity "seen in
    training" when it occurs as an entity in that model's training folds."""
    from bistack.taggers.models.report import entity_texts, tagger_report

    held_by = [fold for _, _, fold in (oof.tagging[row] for row in range(len(folds.rows)))]
    counts: dict[str, Counter[int]] = {}  # entity text: in how many sentences, by fold
    for sentence, fold in zip(folds.rows, held_by, strict=True):
        for text in entity_texts(sentence):
            counts.setdefault(text, Counter())[fold] += 1

    def seen(row: int, text: str) -> bool:
        found = counts.get(text, Counter())
        return found.total() > found[held_by[row]]

    note = (
        "seen in training: an entity whose text occurs as an entity in the folds that trained "
        "its sentence's model"
    )
    model = OutOfFoldTags(folds, oof)
    return dict(tagger_report(model, folds.config.data.train, model_dir, (seen, note)))


class OutOfFoldTags:
    """The out-of-fold tags and confidences of a cross-validated file, as the tagger's report
    reads a tagger: its scores, and each sentence's analysis."""

    def __init__(self, folds: TaggedFile, oof: OutOfFoldTagging) -> None:
        self.folds = folds
        self.oof = oof.tagging
        self.config = folds.config
        self.output_scheme = oof.output_scheme

    def score(self, sentences: Sequence[Sentence], path: Any) -> Any:
        self._check(sentences)
        return self.folds.scores(lambda row: self.oof[row][1], range(len(sentences)))

    def analyse_tokens(
        self, tokens: Sequence[Sequence[str]], documents: Any = None
    ) -> list[SentenceAnalysis]:
        self._check(tokens)
        return [self._analysis(row) for row in range(len(tokens))]

    def _check(self, sentences: Sequence[Any]) -> None:
        if len(sentences) != len(self.folds.rows):
            raise ValueError("out-of-fold tags are of the cross-validated file's sentences")

    def _analysis(self, row: int) -> SentenceAnalysis:
        """The sentence's tags, token confidences and entities with their confidences, as its
        fold model predicted them (entities found by their characters in the spaced text)."""
        prediction, tags, _ = self.oof[row]
        tokens = prediction["tokens"]
        by_place = {(e["start"], e["end"]): e["confidence"] for e in prediction["entities"]}
        entities = {}
        for span in spans_from_tags(tags):
            place = (tokens[span.start]["start"], tokens[span.end - 1]["end"])
            if by_place.get(place) is not None:
                entities[(span.start, span.end, span.label)] = by_place[place]
        confidences = [t["confidence"] for t in tokens]
        return SentenceAnalysis(list(tags), confidences, entities, plain=self.folds.scheme == PLAIN)
