"""What ``bistack blend`` asks of a cross-validated run's kind (its card's ``blend``): the run's
out-of-fold predictions read back and checked, how runs' predictions are weighed and scored,
and what the blend's model keeps of a run's own ensemble.

A kind answers with a :class:`BlendPart`, read from the CV's folder. The blend stacks the
parts' ``predictions`` (every row of the table, in its order) and asks the first part for the
weights and the scores, so that one blend machinery serves classifiers, regressors and
taggers alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from bistack.errors import ConfigError

if TYPE_CHECKING:
    from bistack.folds.contract import JSON
    from bistack.folds.plan import FoldPlan
    from bistack.folds.weights import BlendMethod


class BlendPart(Protocol):
    """One finished CV's out-of-fold predictions, as a blend weighs them: ``predictions``
    ``(rows, ...)`` (the last axis over ``names``: classes, targets or tags), what they are
    (``predicts``: runs blend only with runs that predict alike) and what the weights
    optimise (``OBJECTIVE``, in words)."""

    OBJECTIVE: ClassVar[str]
    predicts: str
    names: list[str]
    predictions: np.ndarray

    def fit(
        self, stacked: np.ndarray, rows: list[int], method: BlendMethod, rounds: int
    ) -> np.ndarray:
        """The weights ``(runs,)`` of the runs' predictions ``stacked`` ``(runs, rows, ...)``
        fitted on ``rows`` alone."""
        ...

    def score(self, predictions: np.ndarray, rows: Sequence[int] | None = None) -> float:
        """The CV's metric of ``predictions`` of ``rows`` (in that order; every row: None)."""
        ...

    def blend_calibration(
        self,
        stacked: np.ndarray,
        weights: np.ndarray,
        fold_weights: list[list[float]],
        assignment: Sequence[int],
    ) -> JSON:
        """What the blend's model fits of its own to calibrate its confidences (a tagger
        blend's temperature), on the runs' out-of-fold predictions ``stacked`` blended by its
        ``weights``, checked nested (each fold's ``fold_weights`` and a fit on the other folds'
        rows alone); nothing (``{}``) where its kind fits none."""
        ...

    def kept_calibration(self, ensemble: JSON) -> JSON:
        """What the blend's model keeps of the run's fold ensemble's settings (``ensemble``:
        its ``ensemble.json``), applied to the run's predictions before they are weighted."""
        ...


def check_oof_rows(path: Path, numbers: list[int], folds: list[object], plan: FoldPlan) -> None:
    """Every row of the table once, in its order (``numbers``: each line's row or line number
    in the table, increasing), each held out by the fold ``folds.json`` deals it (``folds``:
    each line's ``fold``, a list with repeats); an error naming the first line that is not."""
    for index, (number, fold) in enumerate(zip(numbers, folds, strict=False)):
        dealt = [held[index] for held in plan.assignments] if index < plan.rows else None
        expected = None if dealt is None else dealt[0] if plan.repeats == 1 else dealt
        previous = numbers[index - 1] if index else None
        if expected is None or fold != expected or (previous is not None and number <= previous):
            raise ConfigError(
                f"{path}, line {index + 1}: row {number} held out by fold {fold!r}, where "
                "folds.json deals this line's row to fold "
                f"{expected!r}: a row was deleted, added or moved; was it edited? Run the same "
                "bistack cv again to write it anew"
            )
    if len(numbers) != plan.rows:
        raise ConfigError(
            f"{path}: {len(numbers)} rows, where folds.json deals {plan.rows}: a row was "
            "deleted; was it edited? Run the same bistack cv again to write it anew"
        )
