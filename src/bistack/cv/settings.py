"""What a cross-validation is asked to do (:class:`CVSettings`: the flags of ``bistack cv``)
and what it gives back (:class:`CVResult`: its scores)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.errors import ConfigError


@dataclass(frozen=True)
class CVSettings:
    """folds, repeats: K and R; split: ``auto`` (as the kind's family splits: stratified,
    or grouped by ``data.group_column`` or document) or ``plain``; inner_dev: stop each fold
    on a dev split of its training folds instead of its held-out fold; workers: folds trained
    at once, each in its own process; ray: each fold a Ray task."""

    folds: int
    repeats: int = 1
    split: str = "auto"
    inner_dev: bool = False
    workers: int = 1
    ray: bool = False  # folds as Ray tasks (the cluster RAY_ADDRESS names, else a local Ray)
    ray_address: str | None = None  # the cluster's address, over RAY_ADDRESS

    def __post_init__(self) -> None:
        if self.split not in ("auto", "plain"):
            raise ConfigError(f"split {self.split!r}: auto or plain")
        if self.workers < 1:
            raise ConfigError(f"--workers {self.workers}: at least 1")
        if self.ray_address and not self.ray:
            raise ConfigError("a Ray address is for --ray")
        if self.ray and self.workers > 1:
            raise ConfigError("--ray runs each fold as a Ray task; --workers is for one machine")

    def recorded(self) -> dict[str, Any]:
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
