"""What a text model's outputs mean, written once for every text model kind and for PyTorch and
exported models alike: class labels (logits, divided by a temperature fitted on dev, through a
softmax) or numeric targets (standardised values back in original units, optionally calibrated
on dev), as numpy arrays (no torch: an exported model's runtime runs this too).

A model's ``outputs`` object turns the network's raw outputs into predictions and scores, and
training labels into the targets the loss reads. It is the ``outputs`` record of config.json.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bistack.data.tables import Example, class_ids, parse_targets
from bistack.data.tokenize import Token
from bistack.errors import ModelFileError
from bistack.metrics.dev import Evaluation
from bistack.metrics.text import (
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    ClassificationScores,
    RegressionScores,
    Scores,
    attention_diagnostics,
    checked_scaling,
    checked_temperature,
    class_temperature,
    classification_scores,
    expected_calibration_error,
    plausible_temperature,
    regression_scores,
    softmax,
)
from bistack.text_models.blending import ClassBlending, TargetBlending
from bistack.text_models.prediction import TextPrediction

if TYPE_CHECKING:
    from bistack.folds.splitters import SplitKeys


@dataclass
class RawOutputs:
    """Model outputs for a list of texts, in input order."""

    tokens: list[list[Token]]
    outputs: np.ndarray  # (texts, num_outputs) float32: logits, or standardised values
    weights: list[list[float]] | None  # per text, one weight per token
    padding_mass: float  # attention on padding over all batches: exactly 0 by construction

    def attention(self, index: int, wanted: bool) -> list[tuple[Token, float]] | None:
        if not wanted or self.weights is None:
            return None
        return list(zip(self.tokens[index], self.weights[index], strict=True))

    def diagnostics(self) -> dict[str, Any]:
        return attention_diagnostics(self.weights, self.padding_mass)


class ClassOutputs(ClassBlending):
    """A classifier's outputs: one logit per label."""

    LOSS = "cross_entropy"  # what the network is trained with (``network.LOSSES``)

    @staticmethod
    def exported_scores(scores: np.ndarray, version: int) -> np.ndarray:
        """An exported graph's outputs as logits: version 1 graphs gave probabilities."""
        if version >= 2:
            return scores
        with np.errstate(divide="ignore"):  # a probability of 0: a log of -inf, exp'd to 0
            return np.log(scores)

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info  # {"labels": [...], "temperature"?: float}
        checked_temperature(info.get("temperature", 1.0))  # a damaged file, named at open

    @classmethod
    def from_training(
        cls, train: Sequence[Example], columns: Sequence[str], path: str
    ) -> ClassOutputs:
        return cls({"labels": sorted({e.labels[0] for e in train}, key=label_order)})

    @property
    def labels(self) -> list[str]:
        return list(self.info["labels"])

    names = labels

    def __len__(self) -> int:
        return len(self.info["labels"])

    def label_ids(self, examples: Sequence[Example], path: str | Path) -> list[int]:
        """Class ids of the examples' labels; an unknown label is an error naming its row."""
        return class_ids(examples, self.labels, path)

    def training_targets(self, examples: Sequence[Example], path: str | Path) -> list[int]:
        """Class ids ``(n,)``; raises DataError at the row of an unknown label."""
        return self.label_ids(examples, path)

    @property
    def temperature(self) -> float:
        """Logits are divided by it before the softmax (1: as trained; fitted on dev)."""
        return float(self.info.get("temperature", 1.0))

    def probabilities(self, raw: RawOutputs) -> np.ndarray:
        """``(texts, num_labels)`` class probabilities, temperature-scaled (float32)."""
        logits = raw.outputs.astype(np.float32)
        return softmax(logits / np.float32(self.temperature))

    def fit_on_dev(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs, _: bool
    ) -> str:
        """Temperature scaling (Guo et al. 2017): the one temperature that minimises the dev
        negative log-likelihood, kept with the model. Labels never change; probabilities
        become honest. Returns what it did, with the calibration error before and after."""
        gold = np.asarray(self.label_ids(examples, path))
        before = self._calibration_error(raw, gold)
        temperature = class_temperature(raw.outputs.astype(np.float64), gold)
        if not math.isfinite(temperature):
            return "temperature scaling did not converge on dev; probabilities kept as trained"
        if not plausible_temperature(temperature):
            why = (
                f"above {MAX_TEMPERATURE:g} (a model near chance on dev)"
                if temperature > 1
                else f"below {MIN_TEMPERATURE:g} (dev too small or too easy to say how sure to be)"
            )
            return (
                f"temperature scaling fitted {temperature:.3g} on dev, {why}; probabilities "
                "kept as trained"
            )
        self.info["temperature"] = temperature
        after = self._calibration_error(raw, gold)
        self.info["temperature_fit"] = {"ece_before": before, "ece_after": after}
        return (
            f"temperature {temperature:.3f} fitted on dev: expected calibration error "
            f"{before:.4f} -> {after:.4f}"
        )

    def averaged(self, raw: RawOutputs) -> np.ndarray:
        """What an ensemble averages of ``raw``: ``(texts, num_labels)`` probabilities."""
        return self.probabilities(raw)

    # What cross-validation and a fold ensemble do with a classifier's outputs.

    @classmethod
    def applying_nothing(cls, info: dict[str, Any]) -> ClassOutputs:
        """These labels with no temperature (a graph that applied one itself)."""
        return cls({"labels": info["labels"]})

    @classmethod
    def for_table(cls, rows: Sequence[Example], columns: Sequence[str], path: str) -> ClassOutputs:
        """Every class of a cross-validated table, each row's label checked (an error naming
        a bad one's row)."""
        made = cls.from_training(rows, columns, path)
        made.training_targets(rows, path)
        return made

    @staticmethod
    def split_keys(rows: Sequence[Example], columns: Sequence[str], path: str) -> SplitKeys:
        """What a table of classes is split by: each row's class."""
        return {"rows": len(rows), "strata": [e.labels[0] for e in rows], "stratified_by": "class"}

    @staticmethod
    def calibrates(config: Any) -> bool:
        """A classifier calibrates its probabilities after training, always (a temperature)."""
        return True

    def as_raw(self, values: np.ndarray) -> RawOutputs:
        """``(texts, num_labels)`` probabilities (out-of-fold, or an ensemble's mean) as raw
        outputs: their logs, a class no model gives a logit far below the rest."""
        with np.errstate(divide="ignore"):
            logits = np.maximum(np.log(values), -1e4)
        return RawOutputs([[] for _ in values], logits.astype(np.float32), None, 0.0)

    def in_columns(self, values: np.ndarray, labels: Sequence[str]) -> np.ndarray:
        """``values`` (probabilities over ``labels``: a fold's, which may lack a rare class)
        in the columns of these outputs' labels."""
        whole = np.zeros((len(values), len(self)), dtype=np.float32)
        whole[:, [self.labels.index(label) for label in labels]] = values
        return whole

    def member_values(self, raw: RawOutputs, combined: ClassOutputs) -> np.ndarray:
        """A member's probabilities in the columns of the ensemble's labels (``combined``)."""
        return combined.in_columns(self.probabilities(raw), self.labels)

    @classmethod
    def combine(cls, members: Sequence[ClassOutputs], meta: dict[str, Any]) -> ClassOutputs:
        """An ensemble's outputs: every member's labels (a fold may lack a rare one), with the
        temperature ``bistack cv`` fitted on the out-of-fold predictions."""
        labels = sorted({label for m in members for label in m.labels}, key=label_order)
        info: dict[str, Any] = {"labels": labels}
        if "temperature" in meta:
            info["temperature"] = meta["temperature"]
        return cls(info)

    def ensemble_fit(
        self, rows: Sequence[Example], path: str, oof: np.ndarray, refit: bool
    ) -> tuple[dict[str, Any], str]:
        """The temperature an ensemble keeps, fitted on the members' averaged out-of-fold
        probabilities ``oof`` (whatever ``refit`` says: averaging changes how sure a model
        is), and what was done."""
        gold = np.asarray(self.label_ids(rows, path))
        with np.errstate(divide="ignore"):  # in float64, a class no member gives far below
            logits = np.maximum(np.log(oof.astype(np.float64)), -1e4)
        temperature = class_temperature(logits, gold)
        if not math.isfinite(temperature) or not plausible_temperature(temperature):
            return {}, "no plausible temperature fits the out-of-fold predictions; none kept"
        said = f"temperature {temperature:.3f} fitted on the out-of-fold predictions"
        return {"temperature": temperature}, said

    def table_columns(self, label_column: str, probabilities: bool) -> list[str]:
        """A prediction table's columns after the id: the label, under the training label
        column's name, then with ``probabilities`` each class's."""
        return [label_column, *(f"p_{n}" for n in self.labels if probabilities)]

    gold_columns = 1  # of ``oof_columns``, the first: the gold label

    def oof_columns(self) -> list[str]:
        """The out-of-fold table's columns after the row's: gold, label, each probability."""
        return ["gold", "label", *(f"p_{n}" for n in self.labels)]

    def oof_cells(self, example: Example, prediction: TextPrediction) -> tuple[Any, list[Any]]:
        """A row's gold value (as ``oof.jsonl`` writes it) and its ``oof_columns`` cells."""
        probabilities = prediction.probabilities or {}
        gold = example.labels[0]
        return gold, [gold, prediction.label, *(repr(probabilities[n]) for n in self.labels)]

    def _calibration_error(self, raw: RawOutputs, gold: np.ndarray) -> float:
        probabilities = self.probabilities(raw)
        confidence, predicted = probabilities.max(axis=-1), probabilities.argmax(axis=-1)
        return expected_calibration_error(confidence.tolist(), (predicted == gold).tolist())

    def predictions(
        self, texts: Sequence[str], raw: RawOutputs, attention: bool
    ) -> list[TextPrediction]:
        """Label and class probabilities per text."""
        probabilities = self.probabilities(raw).tolist()
        labels = self.labels
        return [
            TextPrediction(
                text,
                label=labels[max(range(len(labels)), key=row.__getitem__)],
                probabilities=dict(zip(labels, row, strict=True)),
                attention=raw.attention(i, attention),
            )
            for i, (text, row) in enumerate(zip(texts, probabilities, strict=True))
        ]

    def scores(
        self, examples: Sequence[Example], raw: RawOutputs, path: str | Path
    ) -> ClassificationScores:
        """Accuracy, macro-F1, the confusion matrix and the expected calibration error of
        ``raw`` against the labels."""
        gold = self.label_ids(examples, path)
        predicted = raw.outputs.argmax(axis=-1).tolist()
        scores = classification_scores(gold, predicted, self.labels, raw.diagnostics())
        error = self._calibration_error(raw, np.asarray(gold))
        return ClassificationScores(scores.to_json() | {"expected_calibration_error": error})

    @staticmethod
    def evaluation(scores: Scores) -> Evaluation:
        """Early stopping maximises dev accuracy."""
        return Evaluation(
            score=scores["accuracy"],
            metrics={"dev_accuracy": scores["accuracy"], "dev_macro_f1": scores["macro_f1"]},
            summary=f"dev accuracy {scores['accuracy']:.2f} macro-F1 {scores['macro_f1']:.2f}",
        )


class TargetOutputs(TargetBlending):
    """A regressor's outputs: one standardised value per target, back in original units with
    the training mean and std, then the dev calibration when training fitted one."""

    LOSS = "mse"  # mean squared error on standardised targets

    @staticmethod
    def exported_scores(scores: np.ndarray, version: int) -> np.ndarray:
        """An exported graph's outputs: standardised values in every version."""
        return scores

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info  # {"targets": [...], "mean": [...], "std": [...], "calibration"?}
        checked_scaling(info, len(info["targets"]))  # a damaged file, named at open

    @classmethod
    def from_training(
        cls, train: Sequence[Example], columns: Sequence[str], path: str
    ) -> TargetOutputs:
        values = parse_targets(train, columns, path)
        means = [statistics.fmean(column) for column in zip(*values, strict=True)]
        stds = [statistics.pstdev(column) or 1.0 for column in zip(*values, strict=True)]
        return cls({"targets": list(columns), "mean": means, "std": stds})

    @property
    def targets(self) -> list[str]:
        return list(self.info["targets"])

    names = targets

    def __len__(self) -> int:
        return len(self.info["targets"])

    def values(self, raw: RawOutputs) -> np.ndarray:
        """``(texts, num_targets)`` in original units (training standardised them), with the
        dev calibration ``scale * value + offset`` per target when training fitted one."""
        mean = np.asarray(self.info["mean"], dtype=np.float32)
        std = np.asarray(self.info["std"], dtype=np.float32)
        values = raw.outputs.astype(np.float32) * std + mean
        calibration = self.info.get("calibration")
        if calibration is not None:
            scale, offset = np.asarray(calibration, dtype=np.float32).T  # (num_targets,) each
            values = values * scale + offset
        return values

    def averaged(self, raw: RawOutputs) -> np.ndarray:
        """What an ensemble averages of ``raw``: ``(texts, num_targets)`` original units."""
        return self.values(raw)

    # What cross-validation and a fold ensemble do with a regressor's outputs.

    @classmethod
    def applying_nothing(cls, info: dict[str, Any]) -> TargetOutputs:
        """These targets as values already in original units: no scaling, no calibration
        (out-of-fold values, an ensemble's mean, a graph that applied them itself)."""
        count = len(info["targets"])
        return cls({"targets": list(info["targets"]), "mean": [0.0] * count, "std": [1.0] * count})

    @classmethod
    def for_table(cls, rows: Sequence[Example], columns: Sequence[str], path: str) -> TargetOutputs:
        """A cross-validated table's targets in original units (out-of-fold values are not
        standardised), each row's values checked (an error naming a bad one's row)."""
        made = cls.applying_nothing({"targets": list(columns)})
        made.training_targets(rows, path)
        return made

    @staticmethod
    def split_keys(rows: Sequence[Example], columns: Sequence[str], path: str) -> SplitKeys:
        """What a table of targets is split by: its first target, binned."""
        first = [t[0] for t in parse_targets(rows, columns, path)]
        return {"rows": len(rows), "targets": first, "targets_are": columns[0]}

    @staticmethod
    def calibrates(config: Any) -> bool:
        """Whether a regressor calibrates after training: with ``regression.calibrate``."""
        return bool(config.regression.calibrate)

    def as_raw(self, values: np.ndarray) -> RawOutputs:
        """Values in original units (out-of-fold, or an ensemble's mean) as raw outputs."""
        return RawOutputs([[] for _ in values], values.astype(np.float32), None, 0.0)

    def in_columns(self, values: np.ndarray, labels: Sequence[str]) -> np.ndarray:
        """A fold's values: every fold predicts every target, in these columns already."""
        return values

    def member_values(self, raw: RawOutputs, combined: TargetOutputs) -> np.ndarray:
        """A member's values in original units, as an ensemble averages them."""
        return self.values(raw)

    @classmethod
    def combine(cls, members: Sequence[TargetOutputs], meta: dict[str, Any]) -> TargetOutputs:
        """An ensemble's outputs: the members' targets (one list for all, else an error), in
        original units, with the scale and offset ``bistack cv`` fitted on uncalibrated
        members' out-of-fold values."""
        targets = members[0].targets
        for member in members:
            if member.targets != targets:
                raise ModelFileError(
                    f"ensemble members predict different targets ({targets} and {member.targets})"
                )
        combined = cls.applying_nothing({"targets": targets})
        if "target_calibration" in meta:
            combined.info["calibration"] = meta["target_calibration"]
        return combined

    def ensemble_fit(
        self, rows: Sequence[Example], path: str, oof: np.ndarray, refit: bool
    ) -> tuple[dict[str, Any], str]:
        """With ``refit`` (uncalibrated members of a calibrating config), the scale and offset
        per target an ensemble keeps, fitted on the members' averaged out-of-fold values
        ``oof``; and what was done."""
        if not refit:
            return {}, ""
        fitted = TargetOutputs(dict(self.info))
        calibration = fitted.fit_calibration(rows, path, fitted.as_raw(oof))
        pairs = ", ".join(f"x{a:.3f} {b:+.3f}" for a, b in calibration)
        said = f"calibrated on the out-of-fold predictions (scale, offset per target): {pairs}"
        return {"target_calibration": calibration}, said

    def table_columns(self, label_column: str, probabilities: bool) -> list[str]:
        """A prediction table's columns after the id: each target's value, under its name
        (a regressor has no probabilities: its card offers none)."""
        return self.targets

    @property
    def gold_columns(self) -> int:
        """Of ``oof_columns``, how many are gold: one a target."""
        return len(self.targets)

    def oof_columns(self) -> list[str]:
        """The out-of-fold table's columns after the row's: each gold target, each value."""
        return [*(f"gold_{n}" for n in self.targets), *self.targets]

    def oof_cells(self, example: Example, prediction: TextPrediction) -> tuple[Any, list[Any]]:
        """A row's gold values (as ``oof.jsonl`` writes them) and its ``oof_columns`` cells."""
        values = prediction.values or {}
        gold = dict(zip(self.targets, map(float, example.labels), strict=True))
        return gold, [*example.labels, *(repr(values[n]) for n in self.targets)]

    def fit_on_dev(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs, calibrate: bool
    ) -> str:
        """With ``calibrate`` (``regression.calibrate``), fit each target's scale and offset on
        dev; returns what it did ("" when nothing)."""
        if not calibrate:
            return ""
        calibration = self.fit_calibration(examples, path, raw)
        pairs = ", ".join(f"x{a:.3f} {b:+.3f}" for a, b in calibration)
        return f"calibrated on dev (scale, offset per target): {pairs}"

    def fit_calibration(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs
    ) -> list[list[float]]:
        """Least-squares ``[scale, offset]`` per target mapping ``raw`` (the network's outputs
        on ``examples``) onto their targets; kept in ``info`` for every later prediction."""
        self.info.pop("calibration", None)
        predicted = self.values(raw).astype(np.float64)
        gold = np.asarray(parse_targets(examples, self.targets, path), dtype=np.float64)
        calibration = []
        for j in range(len(self.targets)):
            design = np.stack([predicted[:, j], np.ones(len(examples))], axis=1)
            solution = np.linalg.lstsq(design, gold[:, j], rcond=None)[0]
            calibration.append([float(solution[0]), float(solution[1])])
        self.info["calibration"] = calibration
        return calibration

    def training_targets(self, examples: Sequence[Example], path: str | Path) -> list[list[float]]:
        """Standardised values ``(n, num_targets)``; raises DataError at the row of a bad one."""
        # A target beyond float32 becomes inf, as it would in the loss: training then stops at
        # its first step, naming the targets (not a numpy warning here).
        with np.errstate(over="ignore", invalid="ignore"):
            values = np.asarray(parse_targets(examples, self.targets, path), dtype=np.float32)
            mean = np.asarray(self.info["mean"], dtype=np.float32)
            return ((values - mean) / np.asarray(self.info["std"], dtype=np.float32)).tolist()

    def predictions(
        self, texts: Sequence[str], raw: RawOutputs, attention: bool
    ) -> list[TextPrediction]:
        """Values per target per text."""
        return [
            TextPrediction(
                text,
                values=dict(zip(self.targets, row, strict=True)),
                attention=raw.attention(i, attention),
            )
            for i, (text, row) in enumerate(zip(texts, self.values(raw).tolist(), strict=True))
        ]

    def scores(
        self, examples: Sequence[Example], raw: RawOutputs, path: str | Path
    ) -> RegressionScores:
        """RMSE and Pearson r per target (original units) and their means over targets."""
        gold = parse_targets(examples, self.targets, path)
        return regression_scores(gold, self.values(raw).tolist(), self.targets, raw.diagnostics())

    @staticmethod
    def evaluation(scores: Scores) -> Evaluation:
        """Early stopping maximises minus dev RMSE."""
        return Evaluation(
            score=-scores["rmse"],
            metrics={"dev_rmse": scores["rmse"], "dev_pearson": scores["pearson"]},
            summary=f"dev RMSE {scores['rmse']:.4f} r {scores['pearson']:.4f}",
        )


Outputs = ClassOutputs | TargetOutputs


def label_order(label: str) -> tuple[int, float | str]:
    """Numeric labels in numeric order ("2" before "10"), then the rest alphabetically."""
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)
