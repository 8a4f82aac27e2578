"""Entity-level precision, recall and F1 as CoNLL's ``conlleval`` computes them.

An entity counts as correct only when its start, end and type all match a gold entity. Entities
are read with conlleval's chunk rules (:func:`bistack.schemes.spans_from_tags`), per sentence.
Scores are on a 0-100 scale, as conlleval prints them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from bistack.schemes import Span, spans_from_tags


@dataclass(frozen=True)
class PRF:
    """Precision, recall, F1 (0-100) and the counts behind them."""

    precision: float
    recall: float
    f1: float
    gold: int
    predicted: int
    correct: int

    @classmethod
    def from_counts(cls, gold: int, predicted: int, correct: int) -> PRF:
        precision = 100.0 * correct / predicted if predicted else 0.0
        recall = 100.0 * correct / gold if gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return cls(precision, recall, f1, gold, predicted, correct)


@dataclass(frozen=True)
class EntityScores:
    """Micro-averaged scores, per-type scores and token accuracy (0-100)."""

    micro: PRF
    per_type: dict[str, PRF]
    token_accuracy: float

    def to_json(self) -> dict[str, object]:
        return {
            "scale": "0-100",  # precision, recall, F1 and token accuracy are percentages
            "precision": self.micro.precision,
            "recall": self.micro.recall,
            "f1": self.micro.f1,
            "token_accuracy": self.token_accuracy,
            "gold_entities": self.micro.gold,
            "predicted_entities": self.micro.predicted,
            "correct_entities": self.micro.correct,
            "per_type": {name: asdict(prf) for name, prf in self.per_type.items()},
        }

    def __str__(self) -> str:
        return format_entity_report(self)


def score_entities(
    gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
) -> EntityScores:
    """Score predicted tag sequences against gold ones, sentence by sentence."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    gold_counts: Counter[str] = Counter()
    predicted_counts: Counter[str] = Counter()
    correct_counts: Counter[str] = Counter()
    tokens = correct_tokens = 0
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted, strict=True)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(
                f"sentence {index}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted"
            )
        gold_spans: set[Span] = set(spans_from_tags(gold_tags))
        predicted_spans: set[Span] = set(spans_from_tags(predicted_tags))
        gold_counts.update(span.label for span in gold_spans)
        predicted_counts.update(span.label for span in predicted_spans)
        correct_counts.update(span.label for span in gold_spans & predicted_spans)
        tokens += len(gold_tags)
        correct_tokens += sum(g == p for g, p in zip(gold_tags, predicted_tags, strict=True))
    per_type = {
        label: PRF.from_counts(gold_counts[label], predicted_counts[label], correct_counts[label])
        for label in sorted(gold_counts | predicted_counts)
    }
    micro = PRF.from_counts(
        sum(gold_counts.values()), sum(predicted_counts.values()), sum(correct_counts.values())
    )
    return EntityScores(micro, per_type, 100.0 * correct_tokens / tokens if tokens else 0.0)


def format_entity_report(scores: EntityScores) -> str:
    """A conlleval-like table: one line per type and one for all."""
    rows = [*scores.per_type.items(), ("overall", scores.micro)]
    width = max(len(name) for name, _ in rows) + 2
    header = (
        f"{'type':<{width}}{'precision':>10}{'recall':>10}{'f1':>10}{'gold':>8}{'predicted':>11}"
    )
    lines = [header]
    for name, prf in rows:
        lines.append(
            f"{name:<{width}}{prf.precision:>10.2f}{prf.recall:>10.2f}{prf.f1:>10.2f}"
            f"{prf.gold:>8}{prf.predicted:>11}"
        )
    lines.append(f"token accuracy: {scores.token_accuracy:.2f}")
    return "\n".join(lines)


def score_labels(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> EntityScores:
    """Per-token scores for tags that are labels of their own (parts of speech): precision,
    recall and F1 of each tag over tokens; the micro average equals token accuracy."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    gold_counts: Counter[str] = Counter()
    predicted_counts: Counter[str] = Counter()
    correct_counts: Counter[str] = Counter()
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted, strict=True)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(
                f"sentence {index}: {len(gold_tags)} gold tags but {len(predicted_tags)} predicted"
            )
        gold_counts.update(gold_tags)
        predicted_counts.update(predicted_tags)
        correct_counts.update(g for g, p in zip(gold_tags, predicted_tags, strict=True) if g == p)
    total, correct = sum(gold_counts.values()), sum(correct_counts.values())
    per_type = {
        label: PRF.from_counts(gold_counts[label], predicted_counts[label], correct_counts[label])
        for label in sorted(gold_counts.keys() | predicted_counts.keys())
    }
    accuracy = 100.0 * correct / total if total else 0.0
    return EntityScores(PRF.from_counts(total, total, correct), per_type, accuracy)
