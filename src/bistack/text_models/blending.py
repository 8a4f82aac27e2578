"""What a blend of cross-validated runs needs of a text model's outputs, as each kind of
outputs answers it (mixed into :class:`~bistack.text_models.outputs.ClassOutputs` and
:class:`~bistack.text_models.outputs.TargetOutputs`): a row of the out-of-fold file read back,
and the objective the blend's weights minimise; and a text CV as a blend reads it
(:class:`TextBlendPart`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bistack.data.tables import Example
from bistack.errors import ConfigError
from bistack.folds.blending import check_oof_rows
from bistack.folds.contract import JSON
from bistack.folds.plan import FoldPlan
from bistack.folds.weights import BlendMethod, Objective, fit_weights

if TYPE_CHECKING:
    from bistack.cards import Card

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


class TextBlendPart:
    """A classifier's or regressor's CV as a blend weighs it: its ``oof.jsonl`` read back (each
    row's probabilities or values, checked line by line), weighted by the outputs' objective
    (log loss, or squared error) and scored by the CV's metric."""

    def __init__(
        self, rows: list[Example], outputs: Any, predictions: np.ndarray, metric: str, source: str
    ) -> None:
        self.rows = rows
        self.outputs = outputs  # ClassOutputs or TargetOutputs: what the predictions are
        self.predictions = predictions
        self.metric = metric
        self.source = source
        self.names: list[str] = list(outputs.names)
        self.predicts = type(outputs).__name__
        self.OBJECTIVE = outputs.BLEND_OBJECTIVE

    @classmethod
    def read(
        cls, card: Card, folder: Path, config: dict[str, Any], plan: FoldPlan, metric: str
    ) -> TextBlendPart:
        """The CV in ``folder`` (of ``card``'s kind and ``config``, split by ``plan``); a line
        of its ``oof.jsonl`` that is not what ``bistack cv`` wrote is an error naming it."""
        columns = config["data"]["label_columns"]
        kind_of_outputs = card.loader_class.OUTPUTS
        oof = folder / "oof.jsonl"
        rows: list[Example] = []
        values, folds = [], []
        try:
            with oof.open(encoding="utf-8") as handle:
                for line in handle:
                    record = json.loads(line)
                    example, predicted = kind_of_outputs.oof_row(record, columns)
                    folds.append(record["fold"])
                    rows.append(example)
                    values.append(predicted)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ConfigError(
                f"{oof}, line {len(rows) + 1}: not an out-of-fold prediction bistack cv wrote "
                f"({error}); was it edited?"
            ) from None
        check_oof_rows(oof, [example.row for example in rows], folds, plan)
        outputs = kind_of_outputs.for_table(rows, columns, str(oof))
        for number, predicted in enumerate(values, 1):
            refusal = outputs.oof_refusal(predicted)
            if refusal is not None:
                raise ConfigError(
                    f"{oof}, line {number}: {refusal}; was it edited? Run the same bistack cv "
                    "again to write it anew"
                )
        predictions = np.array([[v[n] for n in outputs.names] for v in values], dtype=np.float64)
        return cls(rows, outputs, predictions, metric, str(folder))

    def fit(
        self, stacked: np.ndarray, rows: list[int], method: BlendMethod, rounds: int
    ) -> np.ndarray:
        objective = self.outputs.blend_objective([self.rows[i] for i in rows])
        return fit_weights(objective, stacked[:, rows], method, rounds)

    def score(self, predictions: np.ndarray, rows: Sequence[int] | None = None) -> float:
        chosen = range(len(self.rows)) if rows is None else rows
        raw = self.outputs.as_raw(predictions.astype(np.float32))
        examples = [self.rows[i] for i in chosen]
        return float(self.outputs.scores(examples, raw, self.source)[self.metric])

    @staticmethod
    def blend_calibration(
        stacked: np.ndarray,
        weights: np.ndarray,
        fold_weights: list[list[float]],
        assignment: Sequence[int],
    ) -> JSON:
        """Nothing: a run's own calibration is kept (see ``kept_calibration``)."""
        return {}

    @staticmethod
    def kept_calibration(ensemble: JSON) -> JSON:
        """A classifier ensemble's temperature, a regressor ensemble's scale and offset."""
        return {
            key: ensemble[key] for key in ("temperature", "target_calibration") if key in ensemble
        }
