"""Scores of text classifiers, regressors and language models: pure functions over lists, and
read-only reports that print themselves (``str``) and serialise (``to_json``)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bistack.metrics.classification import accuracy, confusion_matrix, macro_f1, pearson, rmse

# Attention is called collapsed on a text when one position, or the first token, takes at
# least this much of it; the diagnostics warn when that holds for most texts ("if all
# the mass sits on <pad> or on the first token, something is broken").
COLLAPSE_MASS = 0.9
FIRST_TOKEN_MASS = 0.5


class Scores(Mapping[str, Any]):
    """Metric name -> value, as ``evaluate`` returns them; ``str()`` is the readable report."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"

    def to_json(self) -> dict[str, Any]:
        return dict(self._values)


class ClassificationScores(Scores):
    def __str__(self) -> str:
        matrix = self["confusion_matrix"]
        lines = [
            f"accuracy {self['accuracy']:.2f}  macro-F1 {self['macro_f1']:.2f}  "
            f"({self['examples']} texts)",
            "confusion matrix (rows gold, columns predicted): " + ", ".join(matrix["labels"]),
        ]
        lines += [
            "  " + " ".join(f"{n:>6}" for n in row) for row in matrix["rows_gold_columns_predicted"]
        ]
        return "\n".join(lines + attention_lines(self))


class RegressionScores(Scores):
    def __str__(self) -> str:
        lines = [
            f"RMSE {self['rmse']:.4f} (mean over targets)  Pearson r {self['pearson']:.4f}  "
            f"({self['examples']} texts)"
        ]
        lines += [
            f"  {name}: RMSE {t['rmse']:.4f}  r {t['pearson']:.4f}"
            for name, t in self["per_target"].items()
        ]
        return "\n".join(lines + attention_lines(self))


class PerplexityScores(Scores):
    def __str__(self) -> str:
        return f"perplexity {self['perplexity']:.2f} over {self['tokens']} tokens"


def classification_scores(
    gold: Sequence[int],
    predicted: Sequence[int],
    labels: Sequence[str],
    attention: dict[str, Any] | None = None,
) -> ClassificationScores:
    """Accuracy, macro-F1 and the confusion matrix of class ids against ``labels``."""
    return ClassificationScores(
        {
            "scale": "0-100",  # accuracy and macro-F1 are percentages
            "accuracy": accuracy(gold, predicted),
            "macro_f1": macro_f1(gold, predicted, len(labels)),
            "confusion_matrix": {
                "labels": list(labels),
                "rows_gold_columns_predicted": confusion_matrix(gold, predicted, len(labels)),
            },
            "examples": len(gold),
            **(attention or {}),
        }
    )


def regression_scores(
    gold: Sequence[Sequence[float]],
    predicted: Sequence[Sequence[float]],
    targets: Sequence[str],
    attention: dict[str, Any] | None = None,
) -> RegressionScores:
    """RMSE and Pearson r per target and their means over targets (rows are examples)."""
    per_target = {
        name: {
            "rmse": rmse([g[j] for g in gold], [p[j] for p in predicted]),
            "pearson": pearson([g[j] for g in gold], [p[j] for p in predicted]),
        }
        for j, name in enumerate(targets)
    }
    return RegressionScores(
        {
            "rmse": sum(t["rmse"] for t in per_target.values()) / len(per_target),
            "pearson": sum(t["pearson"] for t in per_target.values()) / len(per_target),
            "per_target": per_target,
            "examples": len(gold),
            **(attention or {}),
        }
    )


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    count: int
    confidence: float  # mean confidence in the bin
    accuracy: float  # share of its predictions that are right


def reliability(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> list[Bin]:
    """Equal-width confidence bins (the empty ones left out), each with its mean confidence
    and accuracy: a reliability diagram's bars."""
    found = []
    for number in range(bins):
        low, high = number / bins, (number + 1) / bins
        inside = [
            (c, ok)
            for c, ok in zip(confidences, correct, strict=True)
            if (low < c <= high) or (number == 0 and c == 0.0)
        ]
        if inside:
            mean = sum(c for c, _ in inside) / len(inside)
            accuracy = sum(ok for _, ok in inside) / len(inside)
            found.append(Bin(low, high, len(inside), mean, accuracy))
    return found


def expected_calibration_error(
    confidences: Sequence[float], correct: Sequence[bool], bins: int = 10
) -> float:
    """The count-weighted mean gap between confidence and accuracy over equal-width confidence
    bins (Guo et al. 2017): 0 for a perfectly calibrated model."""
    if not confidences:
        return 0.0
    found = reliability(confidences, correct, bins)
    return sum(b.count * abs(b.confidence - b.accuracy) for b in found) / len(confidences)


# A temperature fitted on dev is kept only between these: above the top the fit says the model
# is near chance on dev (every probability pushed towards uniform, so ties give every text one
# label); below the bottom, that dev is too small or too easy to say how sure to be (every
# probability pushed to 1, unseen text too), not how sure it should be.
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.05, 20.0


def plausible_temperature(value: float) -> bool:
    """Whether a fitted temperature is one to keep: finite and strictly inside
    MIN_TEMPERATURE..MAX_TEMPERATURE (a search that ends on a bound was stopped by it)."""
    return math.isfinite(value) and MIN_TEMPERATURE * 1.01 < value < MAX_TEMPERATURE / 1.01


def checked_temperature(value: Any) -> float:
    """A temperature read from a model's files; ValueError unless a finite number > 0 (a
    damaged file: NaN gives silent nonsense, 0 or a negative one flips or breaks every
    probability)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"temperature must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"temperature must be a finite number > 0, got {value!r}")
    return float(value)


def attention_diagnostics(
    weights: Sequence[Sequence[float]] | None, padding_mass: float
) -> dict[str, Any]:
    """Where the attention mass goes, averaged over texts; empty for static pooling."""
    if weights is None:
        return {}
    longer = [w for w in weights if len(w) > 1]  # one token must take all the mass
    count = max(len(longer), 1)
    first = sum(w[0] for w in longer) / count
    peak = sum(max(w) for w in longer) / count
    collapsed = sum(max(w) >= COLLAPSE_MASS for w in longer) / count
    on_first = sum(w[0] >= FIRST_TOKEN_MASS for w in longer) / count
    warnings = []
    if on_first > 0.5:
        warnings.append(f"attention sits on the first token for {on_first:.0%} of texts")
    if collapsed > 0.5:
        warnings.append(f"attention collapses onto one position for {collapsed:.0%} of texts")
    return {
        "attention": {
            "mean_first_token_mass": first,
            "mean_top_position_mass": peak,
            "share_collapsed": collapsed,
            "share_on_first_token": on_first,
            "padding_mass": padding_mass,
            "warnings": warnings,
        }
    }


def attention_lines(scores: Mapping[str, Any]) -> list[str]:
    attention = scores.get("attention")
    if not attention:
        return []
    return [
        f"attention: first-token mass {attention['mean_first_token_mass']:.3f}, "
        f"top-position mass {attention['mean_top_position_mass']:.3f}, "
        f"padding mass {attention['padding_mass']:.1f}",
        *(f"WARNING: {warning}" for warning in attention["warnings"]),
    ]


def class_temperature(logits: np.ndarray, gold: np.ndarray) -> float:
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


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``(n, classes)`` in the logits' dtype."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


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
