"""What a blend of cross-validated runs needs of a text model's outputs, as each kind of
outputs answers it (mixed into :class:`~bistack.text_models.outputs.ClassOutputs` and
:class:`~bistack.text_models.outputs.TargetOutputs`): a row of the out-of-fold file read back,
and the objective the blend's weights minimise."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bistack.data.tables import Example

# The objective of blended predictions ``(rows, outputs)``: its value and its gradient.
Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]
# A probability no run gave the gold class: its log loss is large, not infinite.
FLOOR = 1e-12


class ClassBlending:
    """A classifier's: probabilities read back per label, weighted by log loss."""

    BLEND_OBJECTIVE = "log loss of the weighted mean of probabilities"

    info: dict[str, Any]  # its labels, in their order

    @staticmethod
    def oof_row(record: dict[str, Any], columns: Sequence[str]) -> tuple[Example, dict[str, float]]:
        """A row of ``oof.jsonl``: the row with its gold label, and its probabilities."""
        example = Example(record["text"], (str(record["gold"]),), int(record["row"]))
        return example, dict(record["probabilities"])

    def oof_refusal(self, predicted: dict[str, float]) -> str | None:
        """What is wrong with a row's out-of-fold probabilities, in words (None: nothing):
        each class's, finite, in [0, 1], summing to 1 within 1e-4."""
        labels = list(self.info["labels"])
        unknown = sorted(set(predicted) - set(labels))
        if unknown:
            return f"a probability of {unknown[0]!r}, which is no class of the table's"
        missing = [label for label in labels if label not in predicted]
        if missing:
            return f"no probability of the class {missing[0]!r} (every class has one)"
        for label in labels:
            value = predicted[label]
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                return f"the probability of {label!r} is {value!r}, not a number in [0, 1]"
        total = math.fsum(predicted.values())
        if abs(total - 1.0) > 1e-4:
            return f"the probabilities sum to {total:.6g}, not 1"
        return None

    def blend_objective(self, examples: Sequence[Example]) -> Objective:
        """The mean log loss of blended probabilities ``(rows, labels)`` on ``examples``."""
        index = {label: i for i, label in enumerate(self.info["labels"])}
        gold = np.array([index[e.labels[0]] for e in examples])
        rows = np.arange(len(gold))

        def log_loss(blend: np.ndarray) -> tuple[float, np.ndarray]:
            chosen = np.maximum(blend[rows, gold], FLOOR)
            gradient = np.zeros_like(blend)
            gradient[rows, gold] = -1.0 / (chosen * len(gold))
            return float(-np.mean(np.log(chosen))), gradient

        return log_loss


class TargetBlending:
    """A regressor's: values read back per target, weighted by squared error."""

    BLEND_OBJECTIVE = "squared error (constrained least squares)"

    names: list[str]  # its targets, in their order

    @staticmethod
    def oof_row(record: dict[str, Any], columns: Sequence[str]) -> tuple[Example, dict[str, float]]:
        """A row of ``oof.jsonl``: the row with its gold values, and its predicted values."""
        gold = record["gold"]
        example = Example(record["text"], tuple(repr(gold[c]) for c in columns), int(record["row"]))
        return example, dict(record["values"])

    def oof_refusal(self, predicted: dict[str, float]) -> str | None:
        """What is wrong with a row's out-of-fold values, in words (None: nothing): one finite
        number a target."""
        targets = list(self.names)
        unknown = sorted(set(predicted) - set(targets))
        if unknown:
            return f"a value of {unknown[0]!r}, which is no target of the table's"
        for target in targets:
            value = predicted.get(target)
            if not isinstance(value, int | float) or not math.isfinite(value):
                return f"the value of {target!r} is {value!r}, not a finite number"
        return None

    def blend_objective(self, examples: Sequence[Example]) -> Objective:
        """The mean squared error of blended values ``(rows, targets)`` on ``examples``, each
        target's in units of its standard deviation (so that every target weighs alike)."""
        gold = np.array([[float(v) for v in e.labels] for e in examples], dtype=np.float64)
        scale = gold.std(axis=0)
        scale[scale == 0] = 1.0

        def squared_error(blend: np.ndarray) -> tuple[float, np.ndarray]:
            error = (blend - gold) / scale
            return float(np.mean(error**2)), 2 * error / scale / error.size

        return squared_error
