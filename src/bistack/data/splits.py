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
