"""What a text model's outputs mean, shared by every text model kind: class labels (logits) or
numeric targets (standardised values, optionally calibrated on dev).

A model's ``outputs`` object turns the network's raw outputs into predictions and scores, and
training labels into the tensors the loss reads. It is the ``outputs`` record of config.json.
"""

from __future__ import annotations

import math
import statistics
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from bistack.api.text_prediction import TextPrediction, with_blank_texts
from bistack.data.tables import Example, class_ids, parse_targets, read_table
from bistack.data.tokenize import Token
from bistack.metrics.text import (
    ClassificationScores,
    RegressionScores,
    attention_diagnostics,
    classification_scores,
    expected_calibration_error,
    regression_scores,
)


@dataclass
class RawOutputs:
    """Model outputs for a list of texts, in input order."""

    tokens: list[list[Token]]
    outputs: Tensor  # (texts, num_outputs)
    weights: list[list[float]] | None  # per text, one weight per token
    padding_mass: float  # attention on padding over all batches: exactly 0 by construction

    def attention(self, index: int, wanted: bool) -> list[tuple[Token, float]] | None:
        if not wanted or self.weights is None:
            return None
        return list(zip(self.tokens[index], self.weights[index], strict=True))

    def diagnostics(self) -> dict[str, Any]:
        return attention_diagnostics(self.weights, self.padding_mass)


class ClassOutputs:
    """A classifier's outputs: one logit per label."""

    REGRESSES = False  # trained with cross-entropy

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info  # {"labels": [...]}

    @classmethod
    def from_training(
        cls, train: Sequence[Example], columns: Sequence[str], path: str
    ) -> ClassOutputs:
        return cls({"labels": sorted({e.labels[0] for e in train}, key=_label_order)})

    @property
    def labels(self) -> list[str]:
        return list(self.info["labels"])

    names = labels

    def __len__(self) -> int:
        return len(self.info["labels"])

    def label_ids(self, examples: Sequence[Example], path: str | Path) -> list[int]:
        """Class ids of the examples' labels; an unknown label is an error naming its row."""
        return class_ids(examples, self.labels, path)

    def training_targets(self, examples: Sequence[Example], path: str | Path) -> Tensor:
        """Class ids ``(n,)``; raises DataError at the row of an unknown label."""
        return torch.tensor(self.label_ids(examples, path))

    @property
    def temperature(self) -> float:
        """Logits are divided by it before the softmax (1: as trained; fitted on dev)."""
        return float(self.info.get("temperature", 1.0))

    def probabilities(self, raw: RawOutputs) -> Tensor:
        """``(texts, num_labels)`` class probabilities, temperature-scaled."""
        return torch.softmax(raw.outputs.float() / self.temperature, dim=-1)

    def fit_on_dev(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs, _: bool
    ) -> str:
        """Temperature scaling (Guo et al. 2017): the one temperature that minimises the dev
        negative log-likelihood, kept with the model. Labels never change; probabilities
        become honest. Returns what it did, with the calibration error before and after."""
        gold = torch.tensor(self.label_ids(examples, path))
        logits = raw.outputs.double()
        log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
        optimizer = torch.optim.LBFGS([log_t], lr=0.1, max_iter=200)

        def nll() -> Tensor:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(logits / log_t.exp(), gold)
            loss.backward()
            return loss

        before = self._calibration_error(raw, gold)
        with torch.enable_grad():
            optimizer.step(nll)
        temperature = float(log_t.detach().exp())
        if not math.isfinite(temperature):
            return "temperature scaling did not converge on dev; probabilities kept as trained"
        self.info["temperature"] = temperature
        after = self._calibration_error(raw, gold)
        self.info["temperature_fit"] = {"ece_before": before, "ece_after": after}
        return (
            f"temperature {temperature:.3f} fitted on dev: expected calibration error "
            f"{before:.4f} -> {after:.4f}"
        )

    def _calibration_error(self, raw: RawOutputs, gold: Tensor) -> float:
        confidence, predicted = self.probabilities(raw).max(dim=-1)
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
        """Accuracy, macro-F1 and the confusion matrix of ``raw`` against the labels."""
        gold = self.label_ids(examples, path)
        predicted = raw.outputs.argmax(dim=-1).tolist()
        scores = classification_scores(gold, predicted, self.labels, raw.diagnostics())
        error = self._calibration_error(raw, torch.tensor(gold))
        return ClassificationScores(scores.to_json() | {"expected_calibration_error": error})


class TargetOutputs:
    """A regressor's outputs: one standardised value per target, back in original units with
    the training mean and std, then the dev calibration when training fitted one."""

    REGRESSES = True  # trained with mean squared error on standardised targets

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info  # {"targets": [...], "mean": [...], "std": [...], "calibration"?}

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

    def values(self, raw: RawOutputs) -> Tensor:
        """``(texts, num_targets)`` in original units (training standardised them), with the
        dev calibration ``scale * value + offset`` per target when training fitted one."""
        mean = torch.tensor(self.info["mean"])
        std = torch.tensor(self.info["std"])
        values = raw.outputs.cpu() * std + mean
        calibration = self.info.get("calibration")
        if calibration is not None:
            scale, offset = torch.tensor(calibration).T  # (num_targets,) each
            values = values * scale + offset
        return values

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
        predicted = self.values(raw)
        gold = torch.tensor(parse_targets(examples, self.targets, path))
        calibration = []
        for j in range(len(self.targets)):
            design = torch.stack([predicted[:, j], torch.ones(len(examples))], dim=1).double()
            solution = torch.linalg.lstsq(design, gold[:, j : j + 1].double()).solution
            calibration.append([float(solution[0, 0]), float(solution[1, 0])])
        self.info["calibration"] = calibration
        return calibration

    def training_targets(self, examples: Sequence[Example], path: str | Path) -> Tensor:
        """Standardised values ``(n, num_targets)``; raises DataError at the row of a bad one."""
        values = torch.tensor(parse_targets(examples, self.targets, path))
        return (values - torch.tensor(self.info["mean"])) / torch.tensor(self.info["std"])

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


Outputs = ClassOutputs | TargetOutputs


def _label_order(label: str) -> tuple[int, float | str]:
    """Numeric labels in numeric order ("2" before "10"), then the rest alphabetically."""
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)


class TextModelBase(ABC):
    """What every text model does with its outputs, whatever computes them: predictions,
    scores on a labelled table. A subclass supplies ``run`` and the model files."""

    config: Any  # a config with a ``data`` section of table columns
    outputs: Outputs

    @abstractmethod
    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """The network's outputs for raw texts, in input order."""

    @abstractmethod
    def save_metadata(self, path: str | Path) -> None: ...

    @abstractmethod
    def save_weights(self, path: str | Path) -> None: ...

    def save(self, path: str | Path) -> None:
        self.save_metadata(path)
        self.save_weights(path)

    @property
    def output_info(self) -> dict[str, Any]:
        """Labels, or target names with mean, std and calibration, as config.json keeps them."""
        return self.outputs.info

    @property
    def labels(self) -> list[str]:
        """Class labels (classifiers) or target names (regressors)."""
        return self.outputs.names

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
    """What a regressor adds, over whichever network computes its outputs."""

    outputs: TargetOutputs

    @property
    def targets(self) -> list[str]:
        return self.outputs.names

    def fit_calibration(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs | None = None
    ) -> list[list[float]]:
        """Least-squares ``[scale, offset]`` per target onto ``examples``' targets, used by every
        prediction from now on; ``raw``: the network's outputs on them, if already known."""
        return fit_calibration(self, examples, path, raw)  # type: ignore[arg-type]


def fit_calibration(
    model: TextModelBase,
    examples: Sequence[Example],
    path: str | Path,
    raw: RawOutputs | None = None,
) -> list[list[float]]:
    """Fit a regressor's dev calibration (``TargetOutputs.fit_calibration``) on ``examples``;
    ``raw``: the network's outputs on them when the caller already has them."""
    if not isinstance(model.outputs, TargetOutputs):
        raise TypeError(f"only a regressor is calibrated, not a {type(model).__name__}")
    if raw is None:
        raw = model.run([e.text for e in examples])
    return model.outputs.fit_calibration(examples, path, raw)
