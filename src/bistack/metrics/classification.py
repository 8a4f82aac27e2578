"""Classification and regression metrics: pure functions over lists."""

from __future__ import annotations

import math
from collections.abc import Sequence


def accuracy(gold: Sequence[int], predicted: Sequence[int]) -> float:
    """Percentage of exact matches (0-100)."""
    _check(gold, predicted)
    return 100.0 * sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)


def confusion_matrix(
    gold: Sequence[int], predicted: Sequence[int], num_classes: int
) -> list[list[int]]:
    """``matrix[g][p]``: how many of class ``g`` were predicted as ``p``."""
    _check(gold, predicted)
    matrix = [[0] * num_classes for _ in range(num_classes)]
    for g, p in zip(gold, predicted, strict=True):
        matrix[g][p] += 1
    return matrix


def macro_f1(gold: Sequence[int], predicted: Sequence[int], num_classes: int) -> float:
    """Unweighted mean of per-class F1 over classes that occur in gold or predictions (0-100)."""
    matrix = confusion_matrix(gold, predicted, num_classes)
    scores = []
    for c in range(num_classes):
        true_positive = matrix[c][c]
        gold_count = sum(matrix[c])
        predicted_count = sum(row[c] for row in matrix)
        if gold_count == 0 and predicted_count == 0:
            continue
        scores.append(200.0 * true_positive / (gold_count + predicted_count))
    return sum(scores) / len(scores)


def rmse(gold: Sequence[float], predicted: Sequence[float]) -> float:
    _check(gold, predicted)
    return math.sqrt(sum((g - p) ** 2 for g, p in zip(gold, predicted, strict=True)) / len(gold))


def pearson(gold: Sequence[float], predicted: Sequence[float]) -> float:
    """Pearson correlation; 0.0 when either side is constant."""
    _check(gold, predicted)
    n = len(gold)
    mean_g, mean_p = sum(gold) / n, sum(predicted) / n
    cov = sum((g - mean_g) * (p - mean_p) for g, p in zip(gold, predicted, strict=True))
    var_g = sum((g - mean_g) ** 2 for g in gold)
    var_p = sum((p - mean_p) ** 2 for p in predicted)
    return cov / math.sqrt(var_g * var_p) if var_g and var_p else 0.0


def _check(gold: Sequence, predicted: Sequence) -> None:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold values but {len(predicted)} predicted")
    if not gold:
        raise ValueError("no values to score")
