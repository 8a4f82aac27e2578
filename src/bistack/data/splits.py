"""A fixed held-out split, so runs without a dev file still compare on the same examples."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def split_off_dev(items: Sequence[T], fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """``(train, dev)``: a seeded shuffle, with ``fraction`` of the items (at least one) as dev."""
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    cut = max(1, round(len(shuffled) * fraction))
    return shuffled[cut:], shuffled[:cut]


def kfold(count: int, folds: int, seed: int) -> list[list[int]]:
    """``folds`` disjoint held-out index lists covering ``range(count)`` after a seeded shuffle;
    sizes differ by at most one."""
    if not 2 <= folds <= count:
        raise ValueError(
            f"folds must be between 2 and the number of examples ({count}), got {folds}"
        )
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return [sorted(order[fold::folds]) for fold in range(folds)]
