"""The dev score a run is judged by: which metric picks the best epoch (``Metric``, named on
each kind's card) and what one dev evaluation reports (``Evaluation``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """The dev score that chooses the best epoch: its metrics.csv column, its name, and its
    direction (the loop maximises, so a lower-is-better metric is negated there)."""

    column: str
    name: str
    higher_is_better: bool

    def value(self, loop_score: float) -> float:
        """The metric itself from the score the loop maximised."""
        return loop_score if self.higher_is_better else -loop_score


@dataclass(frozen=True)
class Evaluation:
    """A dev evaluation: the score early stopping maximises, and metrics to log."""

    score: float
    metrics: dict[str, float]
    summary: str  # one line for the console, e.g. "dev P 88.1 R 87.9 F1 88.0"
