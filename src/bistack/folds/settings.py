"""What a cross-validation is asked to do (:class:`CVSettings`: the flags of ``bistack cv``)
and what it gives back (:class:`CVResult`: its scores)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from bistack.errors import ConfigError

# How rows are dealt: ``auto`` as the kind's family splits (stratified, or grouped by
# ``data.group_column`` or document), ``plain`` a seeded shuffle, ``time`` forward-chaining
# blocks of rows in the order of ``data.order_column`` (each fold trains on the blocks before
# the one it holds out), ``dev`` the dev rows held out by one fold, the same in every repeat,
# each repeat trained with its own seed (compare-poolers' seeds).
SplitName = Literal["auto", "plain", "time", "dev"]
SPLITS: tuple[SplitName, ...] = ("auto", "plain", "time")  # what ``bistack cv --split`` offers


@dataclass(frozen=True)
class RayCluster:
    """Folds trained as Ray tasks on the cluster at ``address``; None: the one
    ``RAY_ADDRESS`` names, else a local Ray."""

    address: str | None = None


@dataclass(frozen=True)
class CVSettings:
    """folds, repeats: K and R (the dev split: 1, and R seeds); split: how rows are dealt
    (:data:`SplitName`); inner_dev: stop
    each fold on a dev split of its training folds instead of its held-out fold; workers: folds
    trained at once, each in its own process; ray: each fold a Ray task on that cluster."""

    folds: int
    repeats: int = 1
    split: SplitName = "auto"
    inner_dev: bool = False
    workers: int = 1
    ray: RayCluster | None = None

    def __post_init__(self) -> None:
        if self.split not in get_args(SplitName):
            raise ConfigError(f"split {self.split!r}: {' or '.join(SPLITS)}")
        if self.seeded and self.folds != 1:
            raise ConfigError(
                f"{self.folds} folds: the dev split holds out one fold, the dev rows (its "
                "repeats are seeds)"
            )
        if self.workers < 1:
            raise ConfigError(f"--workers {self.workers}: at least 1")
        if self.ray is not None and self.workers > 1:
            raise ConfigError("--ray runs each fold as a Ray task; --workers is for one machine")

    @property
    def seeded(self) -> bool:
        """Whether its repeats are training seeds of one split (the dev split), not deals."""
        return self.split == "dev"

    def recorded(self) -> dict[str, int | str | bool]:
        """What must match for an output to be resumed (not ``workers`` or ``ray``: results
        are alike)."""
        return {
            "folds": self.folds,
            "repeats": self.repeats,
            "split": self.split,
            "inner_dev": self.inner_dev,
        }


@dataclass(frozen=True)
class CVResult:
    """The scores: ``cv`` on the pooled out-of-fold predictions (mean over repeats), each
    fold's on its held-out rows, their mean and standard deviation; where it all is."""

    metric: str
    cv: float
    folds: dict[str, float]
    output: Path

    @property
    def mean(self) -> float:
        return statistics.fmean(self.folds.values())

    @property
    def std(self) -> float:
        return statistics.stdev(self.folds.values()) if len(self.folds) > 1 else 0.0
