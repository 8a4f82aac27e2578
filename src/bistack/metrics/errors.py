"""Where a tagger's entities go wrong, and what its confidences keep at a threshold: pure
functions over spans ``(start, end, type)``, end exclusive.

Errors are counted as the error-analysis literature does it (e.g. Ratinov & Roth 2009; the
MUC/SemEval-2013 "partial match" classes): a predicted entity on exactly a gold span with
another type is a **type** error; one that overlaps a gold entity of its type with other
boundaries a **boundary** error; one that overlaps a gold entity with other boundaries and
another type a **boundary and type** error; a gold entity nothing overlaps is **missed**, a
predicted one that overlaps no gold entity **spurious**.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Span = tuple[int, int, str]
CLASSES = ("correct", "type", "boundary", "boundary and type", "missed", "spurious")
NONE = "(none)"


def overlaps(one: Span, two: Span) -> bool:
    return one[0] < two[1] and two[0] < one[1]


@dataclass(frozen=True)
class SentenceErrors:
    """One sentence's entities sorted into ``CLASSES``: each item a (gold, predicted) pair,
    either side None where it has none."""

    pairs: dict[str, list[tuple[Span | None, Span | None]]]

    @property
    def errors(self) -> int:
        return sum(len(v) for k, v in self.pairs.items() if k != "correct")


def classify(gold: Iterable[Span], predicted: Iterable[Span]) -> SentenceErrors:
    """Sort a sentence's gold and predicted spans into the error classes; each span is used
    once, exact matches first."""
    gold, predicted = sorted(set(gold)), sorted(set(predicted))
    pairs: dict[str, list[tuple[Span | None, Span | None]]] = {c: [] for c in CLASSES}
    free_gold, free_predicted = list(gold), list(predicted)
    for span in predicted:  # exact spans: correct, or a type error
        same = next((g for g in free_gold if g[:2] == span[:2]), None)
        if same is not None:
            pairs["correct" if same[2] == span[2] else "type"].append((same, span))
            free_gold.remove(same)
            free_predicted.remove(span)
    for span in list(free_predicted):  # overlaps: boundary (and type) errors
        near = [g for g in free_gold if overlaps(g, span)]
        if near:
            chosen = next((g for g in near if g[2] == span[2]), near[0])
            pairs["boundary" if chosen[2] == span[2] else "boundary and type"].append(
                (chosen, span)
            )
            free_gold.remove(chosen)
            free_predicted.remove(span)
    pairs["missed"] = [(g, None) for g in free_gold]
    pairs["spurious"] = [(None, p) for p in free_predicted]
    return SentenceErrors(pairs)


def error_counts(sentences: Iterable[SentenceErrors]) -> dict[str, int]:
    counts = Counter({c: 0 for c in CLASSES})
    for sentence in sentences:
        for name, pairs in sentence.pairs.items():
            counts[name] += len(pairs)
    return dict(counts)


def type_confusion(sentences: Iterable[SentenceErrors], types: Sequence[str]) -> list[list[int]]:
    """Rows gold type (and ``(none)`` for spurious), columns predicted type (and ``(none)``
    for missed), over every pair of every sentence; ``types`` name both, ``(none)`` last."""
    names = [*types, NONE]
    index = {name: i for i, name in enumerate(names)}
    matrix = [[0] * len(names) for _ in names]
    for sentence in sentences:
        for pairs in sentence.pairs.values():
            for gold, predicted in pairs:
                row = index[gold[2] if gold else NONE]
                column = index[predicted[2] if predicted else NONE]
                matrix[row][column] += 1
    return matrix


def at_thresholds(
    confidences: Sequence[float], correct: Sequence[bool], gold: int, thresholds: Sequence[float]
) -> list[dict[str, float]]:
    """Precision and recall (0-100) of the predictions kept at each confidence threshold."""
    rows = []
    for threshold in thresholds:
        kept = [ok for c, ok in zip(confidences, correct, strict=True) if c >= threshold]
        right = sum(kept)
        precision = 100 * right / len(kept) if kept else 0.0
        recall = 100 * right / gold if gold else 0.0
        rows.append(
            {"threshold": threshold, "kept": len(kept), "precision": precision, "recall": recall}
        )
    return rows
