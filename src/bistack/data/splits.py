"""A fixed held-out split, so runs without a dev file still compare on the same examples."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from bistack.errors import DataError

T = TypeVar("T")


def split_off_dev(items: Sequence[T], fraction: float, seed: int) -> tuple[list[T], list[T]]:
    """``(train, dev)``: a seeded shuffle, with ``fraction`` of the items (at least one) as dev."""
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    cut = max(1, round(len(shuffled) * fraction))
    return shuffled[cut:], shuffled[:cut]


class SplitSource(Protocol):
    """Where a split's data comes from (a config's ``data`` section)."""

    train: str
    dev: str | None
    dev_fraction: float
    split_seed: int


@dataclass(frozen=True)
class TrainAndDev(Generic[T]):
    """Training and dev rows; ``calibrate_on_dev`` false where dev is a cross-validation's
    held-out fold: it chooses the epoch, and nothing is fitted on it after training (the
    cross-validation fits each fold's calibration on the other folds' predictions)."""

    train: list[T]
    dev: list[T]
    dev_source: str  # the dev file, or which share of which file was held out
    calibrate_on_dev: bool = True


def read_train_and_dev(read: Callable[[str], list[T]], source: SplitSource) -> TrainAndDev[T]:
    """``read`` train and dev; without a dev file, hold out a fixed share of train."""
    train = read(source.train)
    if source.dev:
        return TrainAndDev(train, read(source.dev), source.dev)
    kept, dev = split_off_dev(train, source.dev_fraction, source.split_seed)
    if not kept:
        raise DataError(
            source.train,
            f"{len(train)} example(s): holding out {source.dev_fraction:.0%} for dev leaves none "
            "to train on; give more data or a data.dev file",
        )
    return TrainAndDev(kept, dev, f"{source.train} (held-out {source.dev_fraction:.0%})")
