"""What a tagger's evaluation report shows (``bistack evaluate MODEL DATA --report DIR``), as
plain data the report writer draws (``bistack.reports``): per-type scores, the error
breakdown and a type confusion matrix, recall on entities seen in training against unseen
ones, the reliability of entity confidences, and the worst sentences with gold and predicted
entities marked. Torch-free: an exported tagger is reported alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bistack.data.tagged import read_tagged
from bistack.files.fingerprints import content_digest
from bistack.metrics.errors import (
    CLASSES,
    NONE,
    SentenceErrors,
    at_thresholds,
    classify,
    error_counts,
    type_confusion,
)
from bistack.metrics.text import expected_calibration_error, reliability
from bistack.runs.model_card import read_card
from bistack.schemes import PLAIN, convert_tags, spans_from_tags

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
WORST = 12


def spans_of(tags: list[str]) -> list[tuple[int, int, str]]:
    return [(s.start, s.end, s.label) for s in spans_from_tags(tags)]


# Whether the entity text (lowercased) in a sentence (its index in the file) was seen in the
# training of the model that tagged it.
Seen = Callable[[int, str], bool]


def seen_entities(model: Any, model_dir: str | Path) -> tuple[Seen | None, str]:
    """Whether an entity text (lowercased) occurs as an entity in the file the model in
    ``model_dir`` was trained on, and a note; None when that file is not there to read, or is
    no longer the one it read (its card's digest of it differs)."""
    data = model.config.data
    train = str(data.train)
    if not train or train.startswith("memory:") or not Path(train).is_file():
        return None, (
            f"the training file ({train or 'not recorded'}) is not there to read: recall on "
            "entities seen in training and unseen ones is left out"
        )
    recorded = ((read_card(model_dir) or {}).get("data_digests") or {}).get("data.train")
    if recorded is not None and recorded != content_digest(train):
        return None, (
            f"the training file {train} has changed since the model was trained on it: recall "
            "on entities seen in training and unseen ones is left out"
        )
    seen = set()
    for sentence in read_tagged(train, data):
        seen.update(entity_texts(sentence))
    checked = "" if recorded else " (this model does not record which file it read: assumed)"
    note = f"seen in training: an entity whose text occurs as an entity in {train}{checked}"
    return (lambda _, text: text in seen), note


def entity_texts(sentence: Any) -> set[str]:
    """The texts (lowercased) of a gold sentence's entities."""
    tags = convert_tags(sentence.tags, "BIO")
    return {" ".join(sentence.tokens[start:end]).lower() for start, end, _ in spans_of(tags)}


def marked(
    tokens: list[str], spans: list[tuple[int, int, str]], confidences=None, gold=None
) -> list:
    """The sentence as segments: plain text, or an entity with its type (and confidence, and,
    given the ``gold`` spans, whether it is right: its span and type both)."""
    segments, position = [], 0
    for start, end, kind in sorted(spans):
        if start > position:
            segments.append({"text": " ".join(tokens[position:start]) + " "})
        entity: dict[str, Any] = {"text": " ".join(tokens[start:end]), "type": kind}
        if gold is not None:
            entity["right"] = (start, end, kind) in gold
        if confidences is not None and (start, end, kind) in confidences:
            entity["confidence"] = confidences[(start, end, kind)]
        segments.append(entity)
        segments.append({"text": " "})
        position = end
    if position < len(tokens):
        segments.append({"text": " ".join(tokens[position:])})
    return segments


def tagger_report(
    model: Any,
    path: str | Path,
    model_dir: str | Path,
    seen: tuple[Seen | None, str] | None = None,
) -> dict[str, Any]:
    """One section of the report: the scores ``evaluate`` gives, and what explains them.
    ``seen``: which entities the tagger of each sentence saw in training, with a note (by
    default, those of the file ``model`` was trained on)."""
    sentences = read_tagged(path, model.config.data)
    scores = model.score(sentences, path)
    section: dict[str, Any] = {"scores": scores.to_json(), "summary": str(scores)}
    per_type = scores.to_json()["per_type"]
    types = sorted(per_type)
    section["figures"] = [per_type_bars(per_type, types)]
    section["notes"] = []
    if model.output_scheme == PLAIN:
        section["notes"].append("plain tags (no entities): scored per tag, no entity errors")
        return section
    analyses = model.analyse_tokens(
        [s.tokens for s in sentences], documents=[s.document for s in sentences]
    )
    rows = sentence_rows(sentences, analyses, model.output_scheme)
    errors = [row[4] for row in rows]
    counts = error_counts(errors)
    section["errors"] = counts
    section["tables"] = [
        {
            "title": "entities by what went right or wrong",
            "columns": ["class", "entities", "what it means"],
            "rows": [[name, counts[name], MEANING[name]] for name in CLASSES],
        }
    ]
    confusion = type_confusion(errors, types)
    section["confusion"] = {"rows": [*types, NONE], "columns": [*types, NONE], "values": confusion}
    section["figures"].append(
        {
            "type": "matrix",
            "name": "type-confusion",
            "title": "gold type (rows) against "
            "predicted type (columns); (none): missed or spurious",
            "rows": [*types, NONE],
            "columns": [*types, NONE],
            "values": confusion,
        }
    )
    drawn: list[dict[str, Any]] = []  # tables shown above the counts
    was_seen, note = seen if seen is not None else seen_entities(model, model_dir)
    section["notes"].append(note)
    if was_seen is not None:
        section["seen_unseen"] = seen_and_unseen(rows, was_seen)
        rows_seen = [
            [k, v["gold"], v["found"], v["recall"]] for k, v in section["seen_unseen"].items()
        ]
        drawn.append(
            {
                "title": "recall on entities seen in training and unseen ones",
                "columns": ["entities", "gold", "found", "recall"],
                "rows": rows_seen,
            }
        )
    section["calibration"] = entity_calibration(rows)
    bins = section["calibration"]["bins"]
    drawn.append(threshold_table(section["calibration"]["thresholds"]))
    section["tables"] = [*drawn, *section["tables"]]  # in the order the page shows them
    said = section["scores"]
    section["headline"] = [
        {"name": "entity F1", "value": said["f1"]},
        {"name": "precision", "value": said["precision"]},
        {"name": "recall", "value": said["recall"]},
        {
            "name": "calibration error",
            "value": section["calibration"]["expected_calibration_error"],
        },
    ]
    section["figures"].append(
        {
            "type": "reliability",
            "name": "reliability",
            "title": "entity confidence against the share right",
            "bins": bins,
            "ece": section["calibration"]["expected_calibration_error"],
        }
    )
    section["examples"] = examples_of(rows)
    return section


def per_type_bars(per_type: dict[str, Any], types: list[str]) -> dict[str, Any]:
    """The chart of each entity type's precision, recall and F1."""
    return {
        "type": "bars",
        "name": "per-type",
        "title": "precision, recall and F1 per type",
        "labels": types,
        "series": {m: [per_type[t][m] for t in types] for m in ("precision", "recall", "f1")},
        "ylabel": "score (0-100)",
    }


def threshold_table(thresholds: list[dict[str, Any]]) -> dict[str, Any]:
    """The table of what each confidence threshold keeps, and its precision and recall."""
    return {
        "title": "entities kept at a confidence threshold",
        "columns": ["threshold", "kept", "precision", "recall"],
        "rows": [[t["threshold"], t["kept"], t["precision"], t["recall"]] for t in thresholds],
    }


# A sentence as the report reads it: the sentence, its gold and predicted spans, each
# predicted entity's confidence, its errors, and the lowest confidence on a wrong entity (2
# where none is wrong).
Row = tuple[Any, list[Any], list[Any], dict[Any, float], SentenceErrors, float]


def sentence_rows(sentences: Sequence[Any], analyses: Sequence[Any], scheme: str) -> list[Row]:
    """Each sentence's :data:`Row`, its gold tags read in the model's output ``scheme``."""
    rows = []
    for sentence, analysis in zip(sentences, analyses, strict=True):
        gold = spans_of(convert_tags(sentence.tags, scheme))
        predicted = spans_of(analysis.tags)
        found = classify(gold, predicted)
        wrong = [
            analysis.entities.get(p, 1.0)
            for k, pairs in found.pairs.items()
            if k != "correct"
            for _, p in pairs
            if p is not None
        ]
        rows.append((sentence, gold, predicted, analysis.entities, found, min(wrong, default=2)))
    return rows


def seen_and_unseen(rows: Sequence[Row], was_seen: Seen) -> dict[str, dict[str, float]]:
    """Gold entities, how many were found, and the recall, of those whose words the tagger
    saw in training and of the rest."""
    split = {"seen": [0, 0], "unseen": [0, 0]}  # [found, gold]
    for index, (sentence, gold, predicted, *_) in enumerate(rows):
        for span in gold:
            text = " ".join(sentence.tokens[span[0] : span[1]]).lower()
            bucket = split["seen" if was_seen(index, text) else "unseen"]
            bucket[1] += 1
            bucket[0] += span in predicted
    return {
        name: {"gold": g, "found": f, "recall": 100 * f / g if g else 0.0}
        for name, (f, g) in split.items()
    }


def entity_calibration(rows: Sequence[Row]) -> dict[str, Any]:
    """How well the predicted entities' confidences say how often they are right: the
    expected calibration error, the reliability bins, and what each threshold keeps."""
    confidences, correct = [], []
    for _, gold, predicted, entities, *_ in rows:
        for span in predicted:
            confidence = entities.get(span)
            if confidence is not None:
                confidences.append(confidence)
                correct.append(span in gold)
    gold_count = sum(len(g) for _, g, *_ in rows)
    return {
        "expected_calibration_error": expected_calibration_error(confidences, correct),
        "entities": len(confidences),
        "bins": [b.__dict__ for b in reliability(confidences, correct)],
        "thresholds": at_thresholds(confidences, correct, gold_count, THRESHOLDS),
    }


def examples_of(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The sentences with the most errors, and those with the least sure wrong entities."""
    worst = sorted(rows, key=lambda r: (-r[4].errors, r[5]))[:WORST]
    unsure = sorted((r for r in rows if r[5] <= 1), key=lambda r: r[5])[:WORST]
    return [
        {
            "title": "the sentences with the most errors",
            "items": [example(r) for r in worst if r[4].errors],
        },
        {
            "title": "the lowest confidences on wrong entities",
            "items": [example(r) for r in unsure],
        },
    ]


MEANING = {
    "correct": "the span and the type as gold",
    "type": "the right span, another type",
    "boundary": "the right type, other boundaries (overlapping)",
    "boundary and type": "overlapping, with other boundaries and another type",
    "missed": "a gold entity no prediction overlaps",
    "spurious": "a predicted entity no gold one overlaps",
}


def example(row: tuple) -> dict[str, Any]:
    sentence, gold, predicted, confidences, found, _ = row
    return {
        "where": f"line {sentence.line}",
        "errors": found.errors,
        "gold": marked(sentence.tokens, gold),
        "predicted": marked(sentence.tokens, predicted, confidences, set(gold)),
    }
