"""Batches of similar length, so little compute is spent on padding (no torch: the exported
models' runtime batches with it too)."""

from __future__ import annotations

import random
from collections.abc import Sequence


def bucket_batches(
    lengths: Sequence[int], batch_size: int, *, shuffle: bool, seed: int = 0, pool: int = 50
) -> list[list[int]]:
    """Index batches of similar length.

    Shuffled: indices are shuffled, cut into pools of ``pool`` batches, each pool sorted by
    length and cut into batches, and the batches shuffled. Not shuffled: sorted by length.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
    order = list(range(len(lengths)))
    rng = random.Random(seed)
    if not shuffle:
        order.sort(key=lambda i: lengths[i])
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(order)
    batches: list[list[int]] = []
    step = batch_size * pool
    for start in range(0, len(order), step):
        chunk = sorted(order[start : start + step], key=lambda i: lengths[i])
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches
