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
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bistack.data.tables import Example, class_ids, parse_targets, read_table
from bistack.data.tokenize import Token
from bistack.metrics.dev import Evaluation
from bistack.metrics.text import (
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    ClassificationScores,
    RegressionScores,
    Scores,
    attention_diagnostics,
    checked_temperature,
    classification_scores,
    expected_calibration_error,
    plausible_temperature,
    regression_scores,
)
from bistack.text_models.prediction import TextPrediction, with_blank_texts


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


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(n, classes)`` in the logits' dtype."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


class ClassOutputs:
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
        temperature = fit_temperature(raw.outputs.astype(np.float64), gold)
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


def checked_scaling(info: dict[str, Any], targets: int) -> None:
    """ValueError unless a regressor's ``mean``, ``std`` and ``calibration`` (one ``[scale,
    offset]`` per target, when fitted) are finite numbers, one for each of its ``targets``:
    a damaged file gives every prediction NaN or nonsense, so it is named when it opens."""
    for key in ("mean", "std"):
        values = info[key]
        if (
            not isinstance(values, list)
            or len(values) != targets
            or not all(_finite(v) for v in values)
        ):
            raise ValueError(f"{key} must be {targets} finite numbers, got {values!r:.80}")
    calibration = info.get("calibration")
    if calibration is not None and (
        not isinstance(calibration, list)
        or len(calibration) != targets
        or not all(isinstance(pair, list) and len(pair) == 2 for pair in calibration)
        or not all(_finite(v) for pair in calibration for v in pair)
    ):
        raise ValueError(
            f"calibration must be {targets} pairs [scale, offset] of finite numbers, "
            f"got {calibration!r:.80}"
        )


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def fit_temperature(logits: np.ndarray, gold: np.ndarray) -> float:
    """The temperature T minimising the mean negative log-likelihood of ``gold`` under
    ``softmax(logits / T)`` (float64 ``(n, classes)``), by Newton's method on log(1/T) with
    backtracking (the likelihood is convex in 1/T, so the minimum is the only one); inf or
    nan when it has none (a dev set the logits already separate perfectly pushes T to 0)."""
    rows = np.arange(len(gold))

    def nll(u: float) -> float:
        scaled = logits * math.exp(u)
        top = scaled.max(axis=1, keepdims=True)
        log_z = top[:, 0] + np.log(np.exp(scaled - top).sum(axis=1))
        return float((log_z - scaled[rows, gold]).mean())

    u = 0.0
    for _ in range(100):
        beta = math.exp(u)
        p = softmax(logits * beta)
        mean = (p * logits).sum(axis=1)  # E[logit] under p
        # d/du nll = beta * E_rows[E_p[z] - z_gold]; second derivative adds beta^2 * Var_p[z].
        gradient = beta * float((mean - logits[rows, gold]).mean())
        variance = float(((p * logits**2).sum(axis=1) - mean**2).mean())
        curvature = gradient + beta * beta * variance
        if abs(gradient) < 1e-10:
            break
        step = -gradient / curvature if curvature > 0 else -math.copysign(1.0, gradient)
        step = max(-5.0, min(5.0, step))
        current = nll(u)
        while step and nll(u + step) > current:
            step /= 2
            if abs(step) < 1e-12:
                step = 0.0
        if step == 0.0:
            break
        u += step
        if u > 50:  # T below e^-50: no finite minimum
            return math.nan
    return math.exp(-u)


class TargetOutputs:
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


class TextModelBase(ABC):
    """What every text model does with its outputs, whatever computes them (PyTorch, or an
    exported graph on onnxruntime): predictions, scores on a labelled table. A subclass
    supplies ``run`` (its network's raw outputs for raw texts)."""

    config: Any  # a config with a ``data`` section of table columns
    outputs: Outputs

    @property
    def attends(self) -> bool:
        """Whether ``predict(attention=True)`` gives token weights."""
        return False

    def attention_refusal(self) -> str | None:
        """Why it has no token attention weights to show, and what to do instead; None where
        it has them."""
        if self.attends:
            return None
        pooling = getattr(getattr(self.config, "pooling", None), "type", None)
        return (
            f"it pools with {pooling!r}, which weighs no tokens; train one with "
            "'additive' or 'dot' pooling for token weights"
        )

    @abstractmethod
    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """The network's outputs for raw texts, in input order."""

    def shared_parts(self) -> dict[str, Any]:
        """What another member of its ensemble takes when it opens, rather than load it again
        (a frozen backbone); the keywords of its class's ``from_saved``."""
        return {}

    def shared_stage_key(self) -> Hashable | None:
        """Equal for models whose first stage (``shared_stage``) gives the same result on the
        same texts, so that an ensemble runs it once; None: it has none to share."""
        return None

    def shared_stage(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> Any:
        """The first stage of ``run`` on raw texts (a model with a ``shared_stage_key``)."""
        raise NotImplementedError(f"{type(self).__name__} shares no first stage")

    def run_after(self, stage: Any, texts: Sequence[str]) -> RawOutputs:
        """``run``'s outputs from its first stage's result (``shared_stage``)."""
        raise NotImplementedError(f"{type(self).__name__} shares no first stage")

    @property
    def output_info(self) -> dict[str, Any]:
        """Labels, or target names with mean, std and calibration, as config.json keeps them."""
        return self.outputs.info

    @property
    def labels(self) -> list[str]:
        """Class labels (classifiers) or target names (regressors)."""
        return self.outputs.names

    def describe(self) -> dict[str, Any]:
        """What ``GET /info`` and ``bistack info`` say of its outputs."""
        return {"labels": self.labels}

    def predict(
        self,
        texts: Sequence[str],
        attention: bool = False,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> list[TextPrediction]:
        """One prediction per text (a single string is one text); ``attention=True`` adds
        token weights when the pooling has them; ``batch_size`` texts per forward pass. A blank
        text gets an empty prediction (no label, no values), so results stay aligned;
        ``progress`` shows a bar."""

        def predict(chosen: list[str]) -> list[TextPrediction]:
            raw = self.run(chosen, batch_size, progress)
            return self.outputs.predictions(chosen, raw, attention)

        return with_blank_texts(texts, predict)

    def evaluate(self, path: str | Path) -> ClassificationScores | RegressionScores:
        """Metrics on a labelled table, with attention diagnostics when the pooling attends."""
        data = self.config.data
        examples = read_table(path, data.text_column, data.label_columns, file_format=data.format)
        return self.score(examples, path)

    def score(
        self, examples: Sequence[Example], path: str | Path = "<data>"
    ) -> ClassificationScores | RegressionScores:
        """Metrics against the examples' labels; a bad label fails, naming its row, before any
        work."""
        self.outputs.training_targets(examples, path)
        return self.metrics(examples, self.run([e.text for e in examples]), path)

    def metrics(
        self, examples: Sequence[Example], raw: RawOutputs, path: str | Path = "<data>"
    ) -> ClassificationScores | RegressionScores:
        """Metrics of outputs already computed (``raw``) against the examples' labels."""
        return self.outputs.scores(examples, raw, path)


class Regression:
    """What a regressor adds, over whichever network computes its outputs. Its ``outputs``
    are a regressor's (``TargetOutputs``), narrower than a text model's: mypy refuses the
    narrowing of a writable attribute in the classes that mix this in, hence their ignores."""

    outputs: TargetOutputs

    @property
    def targets(self) -> list[str]:
        return self.outputs.names

    def fit_calibration(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs | None = None
    ) -> list[list[float]]:
        """Least-squares ``[scale, offset]`` per target onto ``examples``' targets, used by every
        prediction from now on; ``raw``: the network's outputs on them, if already known."""
        if raw is None:
            raw = self.run([e.text for e in examples])  # type: ignore[attr-defined]  # its model's
        return self.outputs.fit_calibration(examples, path, raw)
