"""``bistack blend CV_DIR CV_DIR ... --output DIR``: cross-validated runs as one model.

The runs' out-of-fold predictions (every row predicted by a fold model that never saw it) are
stacked, and weights, non-negative and summing to one, fitted to them
(:mod:`bistack.folds.weights`; the objective is the kind's, :mod:`bistack.folds.blending`:
squared error for regressors, log loss for classifiers, entity F1 of the weighted token
marginals for taggers, searched over a grid of the simplex). Fitted and scored on the same
predictions, the blend's score is optimistic; so it is also scored nested: for each fold,
weights fitted on the other folds' out-of-fold predictions predict that fold's rows, and the
pooled predictions are scored as a CV is. Both are reported beside each run's own CV score,
with what each run adds (the in-sample score of the blend refitted without it).

``DIR`` holds ``blend.json`` (the weights, the scores, each run's contribution) and ``model/``:
an ensemble directory of every fold model of the runs given weight (a run of weight 0 is left
out), which the door opens as one model: each run's folds averaged and calibrated as its own
ensemble is, then the runs weighted (:class:`bistack.text_models.ensemble.TextBlend`); a
tagger blend weights its members' marginals
(:class:`bistack.taggers.ensembles.ensemble.TaggerEnsemble`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bistack.blends.runs import CVRun, read_run, refuse_unlike, run_names
from bistack.cv.folder import MODEL_DIR
from bistack.errors import ConfigError
from bistack.files.claim import Layout, claim_folder, output_folder, staged
from bistack.files.ensemble_dir import ensemble_layout, write_ensemble
from bistack.files.modeldir import write_json
from bistack.files.paths import refuse_overlap
from bistack.files.swap import atomic_folder
from bistack.folds.weights import MAX_ROUNDS, METHODS, ROUNDS, BlendMethod, blended
from bistack.metrics.noise import t_quantile_975

BLEND_FILE = "blend.json"
Say = Callable[[str], None]
# Fits the weights ``(runs,)`` on the rows it is given (their indices).
Fit = Callable[[list[int]], np.ndarray]


@dataclass(frozen=True)
class BlendResult:
    """The blend's metric, its weight per run, its nested and in-sample scores, each run's own
    CV score, where it was written, and whether it beats the best run beyond the noise
    (``verdict``: as ``blend.json`` holds it)."""

    metric: str
    weights: dict[str, float]
    nested: float
    in_sample: float
    runs: dict[str, float]
    output: Path
    verdict: dict[str, Any]


def blend_layout(name: str) -> Layout | bool:
    """A blend's output folder (see ``bistack.files.claim``): ``blend.json`` and the blended
    ensemble under ``model/``."""
    if name == MODEL_DIR:
        return ensemble_layout()
    return name == BLEND_FILE or staged(name)


def blend(
    cv_dirs: Sequence[str | Path],
    output: str | Path,
    *,
    method: BlendMethod = "simplex",
    rounds: int | None = None,
    overwrite: bool = False,
    say: Say = print,
) -> BlendResult:
    """Blend the finished CVs in ``cv_dirs`` into ``output`` (``bistack.blend`` from Python):
    ``method`` ``simplex`` (the weights that minimise the objective) or ``greedy`` (Caruana's
    selection with replacement, over ``rounds`` rounds: ``ROUNDS`` unless given); ``overwrite``
    replaces an earlier blend there. Returns the weights and scores."""
    if method not in METHODS:
        raise ConfigError(f"--method {method}: one of {', '.join(METHODS)}")
    if rounds is not None and method != "greedy":
        raise ConfigError("--rounds counts the greedy method's rounds; add --method greedy")
    if rounds is not None and not 1 <= rounds <= MAX_ROUNDS:
        raise ConfigError(f"--rounds {rounds}: from 1 to {MAX_ROUNDS:,}")
    chosen = ROUNDS if rounds is None else rounds
    if isinstance(cv_dirs, str | Path):
        raise ConfigError(
            f"cv_dirs {str(cv_dirs)!r} is one path: give a list of cross-validations' folders, "
            "at least two"
        )
    paths = [Path(p) for p in cv_dirs]
    if len(paths) < 2:
        raise ConfigError("a blend takes at least two cross-validations' folders")
    if len({p.resolve() for p in paths}) < len(paths):
        raise ConfigError("a cross-validation's folder is given twice; give each run once")
    output = output_folder(output, "--output")
    refuse_overlap(output, [("a cross-validation's folder", str(p)) for p in paths], "--output")
    claim_folder(output, "--output", overwrite=overwrite, signature=BLEND_FILE, layout=blend_layout)
    runs = [read_run(path, name) for path, name in zip(paths, run_names(paths), strict=True)]
    refuse_unlike(runs)
    for run in runs:
        if run.plan.repeats > 1:
            say(
                f"{run.name}: blended on the mean of its {run.plan.repeats} repeats' out-of-fold "
                "predictions"
            )
    first = runs[0]
    metric = str(first.summary["metric"])
    stacked = np.stack([run.predictions for run in runs])  # (runs, rows, ...)

    def fit(rows: list[int]) -> np.ndarray:
        return first.part.fit(stacked, rows, method, chosen)

    score = first.part.score  # the metric of predictions of rows (every row: None)
    own = {run.name: score(run.predictions) for run in runs}  # as the blend scores each run
    for run in runs:
        if own[run.name] != float(run.summary["cv"]):
            say(
                f"{run.name}: CV {metric} {float(run.summary['cv']):.4f} as its CV scored it, "
                f"{own[run.name]:.4f} as the blend scores its out-of-fold predictions (the "
                "figure its table and verdict use)"
            )
    everything = list(range(len(first.predictions)))
    weights = fit(everything)
    in_sample = score(blended(weights, stacked))
    nested_predictions, fold_weights = nested(fit, stacked, first.plan.assignments[0])
    nested_score = score(nested_predictions)
    without = [score_without(runs, r, method, chosen, score) for r in range(len(runs))]
    record = blend_record(runs, own, weights, fold_weights, without, metric, method, chosen)
    assignment = first.plan.assignments[0]
    record["scores"] = {
        "nested": nested_score,
        "in_sample": in_sample,
        "nested_by_fold": by_fold(nested_predictions, assignment, score),
    }
    record["verdict"] = verdict(runs, own, nested_predictions, assignment, score)
    calibration = first.part.blend_calibration(
        stacked, weights, fold_weights, first.plan.assignments[0]
    )
    record |= calibration
    with atomic_folder(output) as staging:
        write_json(staging / BLEND_FILE, record)
        fitted = calibration.get("calibration")  # the model's own, where its kind fits one
        write_model(staging / MODEL_DIR, runs, weights, record, fitted)
    result = BlendResult(
        metric,
        {run.name: float(w) for run, w in zip(runs, weights, strict=True)},
        nested_score,
        in_sample,
        own,
        output,
        record["verdict"],
    )
    say_result(result, record, say)
    return result


def verdict(
    runs: list[CVRun],
    own: dict[str, float],
    nested_predictions: np.ndarray,
    assignment: Sequence[int],
    score: Callable,
) -> dict[str, Any]:
    """Whether the nested blend beats the best single run (the best score ``own``: each run's
    out-of-fold predictions as the blend scores them), by how much, and whether that is beyond
    the noise: the paired difference of their scores fold by fold (the same folds, the blend's
    minus the run's) is beyond noise when its mean over its standard error exceeds Student's t
    at 95% two-sided for the folds' degrees of freedom (K - 1). The best run is chosen with
    hindsight (on every fold); ``picked`` says the same against the run the CV would have
    picked without it: on each fold, the run best on the other folds."""
    higher = runs[0].card.metric.higher_is_better
    choose = max if higher else min
    best = choose(runs, key=lambda run: own[run.name])
    blend_scores = by_fold(nested_predictions, assignment, score)
    best_scores = by_fold(best.predictions, assignment, score)
    differences = [b - r for b, r in zip(blend_scores, best_scores, strict=True)]
    against_picked, picks = [], []
    for fold, blended_score in zip(sorted(set(assignment)), blend_scores, strict=True):
        held = [i for i, f in enumerate(assignment) if f == fold]
        others = [i for i, f in enumerate(assignment) if f != fold]
        picked = choose(runs, key=lambda run: score(run.predictions[others], others))
        picks.append(picked.name)
        against_picked.append(blended_score - score(picked.predictions[held], held))
    found = paired(differences, higher)
    says = {
        "within": f"the nested blend and {best.name}, the best run, are within the noise",
        "wins": f"the nested blend beats {best.name}, the best run, beyond the noise",
        "loses": f"the nested blend loses to {best.name}, the best run, beyond the noise",
    }[found["outcome"]]
    chosen = paired(against_picked, higher)
    picked_says = {
        "within": "within the noise of",
        "wins": "beyond the noise ahead of",
        "loses": "beyond the noise behind",
    }[chosen["outcome"]]
    return {
        "best_run": best.name,
        "difference": found["mean"],
        "standard_error": found["error"],
        "per_fold": differences,
        "beyond_noise": found["outcome"] != "within",
        "blend_wins": found["gain"] > 0,
        "t": found["t"],
        "t_needed": found["t_needed"],
        "picked": {"runs": picks, "per_fold": against_picked, **chosen},
        "says": f"{says} ({found['words']}); against the run the CV would have picked on each "
        f"fold (the best on the other folds: {', '.join(picks)}), {picked_says} it "
        f"({chosen['words']})",
    }


def by_fold(predictions: np.ndarray, assignment: Sequence[int], score: Callable) -> list[float]:
    """``predictions`` of every row scored on each fold's held-out rows alone, in fold order
    (the blend's nested score fold by fold, as a CV's table gives each fold's)."""
    found = []
    for fold in sorted(set(assignment)):
        held = [i for i, f in enumerate(assignment) if f == fold]
        found.append(float(score(predictions[held], held)))
    return found


def paired(differences: list[float], higher: bool) -> dict[str, Any]:
    """The paired differences' mean, standard error, |t| against Student's 95% two-sided
    quantile for their degrees of freedom, the outcome (``within`` the noise, or the blend
    ``wins`` or ``loses`` beyond it) and those figures in words."""
    mean = float(np.mean(differences))
    error = float(np.std(differences, ddof=1) / np.sqrt(len(differences)))
    gain = mean if higher else -mean  # in the metric's good direction
    degrees = len(differences) - 1
    quantile = t_quantile_975(degrees)
    statistic = abs(mean) / error if error > 0 else (0.0 if mean == 0 else float("inf"))
    outcome = "within" if statistic <= quantile else "wins" if gain > 0 else "loses"
    words = (
        f"{mean:+.4f} a fold on average, standard error {error:.4f}, blend minus run; |t| "
        f"{statistic:.2f} against {quantile:.2f}, paired t at 95% two-sided with {degrees} "
        "degrees of freedom"
    )
    return {
        "mean": mean,
        "error": error,
        "gain": gain,
        "t": statistic,
        "t_needed": quantile,
        "outcome": outcome,
        "words": words,
    }


def nested(
    fit: Fit, stacked: np.ndarray, assignment: Sequence[int]
) -> tuple[np.ndarray, list[list[float]]]:
    """Each fold's rows blended by weights ``fit`` on the other folds' rows alone (never on
    the rows they predict), pooled ``(rows, outputs)``; and each fold's weights."""
    predictions = np.zeros(stacked.shape[1:])
    folds = []
    for fold in sorted(set(assignment)):
        held = [i for i, f in enumerate(assignment) if f == fold]
        weights = fit([i for i, f in enumerate(assignment) if f != fold])
        predictions[held] = blended(weights, stacked[:, held])
        folds.append([float(w) for w in weights])
    return predictions, folds


def score_without(
    runs: list[CVRun], left: int, method: BlendMethod, rounds: int, score: Callable
) -> float:
    """The in-sample score of the blend of the other runs (refitted): what run ``left`` adds."""
    others = [run for r, run in enumerate(runs) if r != left]
    stacked = np.stack([run.predictions for run in others])
    everything = list(range(len(stacked[0])))
    return float(score(blended(others[0].part.fit(stacked, everything, method, rounds), stacked)))


def blend_record(
    runs: list[CVRun],
    own: dict[str, float],
    weights: np.ndarray,
    fold_weights: list[list[float]],
    without: list[float],
    metric: str,
    method: BlendMethod,
    rounds: int,
) -> dict[str, Any]:
    """What ``blend.json`` says: how the weights were fitted, each run with its CV score (as
    the blend scores its out-of-fold predictions: ``own``), weight and contribution, and the
    weights each fold's nested fit chose."""
    first = runs[0]
    return {
        "metric": metric,
        "higher_is_better": first.card.metric.higher_is_better,
        "method": method,
        **({"rounds": rounds} if method == "greedy" else {}),
        "objective": first.part.OBJECTIVE,
        "rows": first.plan.rows,
        "folds": first.plan.folds,
        "split": first.plan.split,
        "runs": [
            {
                "name": run.name,
                "path": str(run.path),
                "kind": run.card.kind,
                "cv": own[run.name],
                "weight": float(weight),
                "blend_without_it": left_out,
            }
            for run, weight, left_out in zip(runs, weights, without, strict=True)
        ],
        "nested_weights": {
            f"fold{fold}": dict(zip((run.name for run in runs), chosen, strict=True))
            for fold, chosen in enumerate(fold_weights)
        },
    }


def write_model(
    target: Path,
    runs: list[CVRun],
    weights: np.ndarray,
    record: dict[str, Any],
    fitted: object = None,
) -> None:
    """``model/``: one ensemble directory of the fold models of every run given weight, each
    run's members, calibration and frozen backbone named in ``ensemble.json``'s ``runs``, with
    the blend's own calibration where it ``fitted`` one (a tagger blend's temperature)."""
    members: dict[str, Path] = {}
    kept, folds = [], {}
    for run, weight in zip(runs, weights, strict=True):
        if weight <= 0:
            continue
        names = []
        for folder in run.members():
            name = f"{run.name}-{folder.name}"
            members[name] = folder
            names.append(name)
            folds[name] = run.ensemble.values.get("folds", {}).get(folder.name)
        calibration = run.part.kept_calibration(run.ensemble.values)
        kept.append(
            {"name": run.name, "kind": run.card.kind, "weight": float(weight), "members": names}
            | {"backbone": run.backbone}
            | calibration
        )
    scores = record["scores"]
    meta = {
        "kind": kept[0]["kind"],  # the card every outlet reads: its runs' kinds predict alike
        "runs": kept,
        "folds": folds,
        **({"calibration": fitted} if fitted else {}),
        "cv": {
            "metric": record["metric"],
            "cv": scores["nested"],
            "in_sample": scores["in_sample"],
            "split": f"{record['folds']} folds, {record['split']}",
            "verdict": record["verdict"]["says"],
        },
    }
    write_ensemble(target, members, meta)


def say_result(result: BlendResult, record: dict[str, Any], say: Say) -> None:
    """The table of runs (CV score, weight, the blend without it), then the blend's scores."""
    metric = result.metric
    width = max(len(name) for name in result.runs)
    say(
        f"blend of {len(result.runs)} cross-validations of {record['rows']} rows "
        f"({record['folds']} folds, one split), weights by {record['method']}"
    )
    say(f"{'run':<{width}}  CV {metric:<8}  weight  blend without it")
    for entry in record["runs"]:
        say(
            f"{entry['name']:<{width}}  {entry['cv']:<11.4f}  {entry['weight']:<6.3f}  "
            f"{entry['blend_without_it']:.4f}"
        )
    say(
        f"blend: nested {metric} {result.nested:.4f} (each fold's weights fitted on the other "
        f"folds' out-of-fold predictions), in-sample {result.in_sample:.4f} (optimistic)"
    )
    say(f"verdict: {record['verdict']['says']}")
    fit = record.get("out_of_fold_fit")
    if fit is not None:
        used = "kept" if fit["kept"] else "not kept: confidences at temperature 1"
        say(
            f"confidences: temperature {fit['temperature']:.3f} fitted on {fit['fitted_on']} "
            f"(nested entity log-loss {fit['nested_log_loss_before']:.4f} at 1, "
            f"{fit['nested_log_loss_after']:.4f} at the folds' own fits): {used}"
        )
    say(
        f"the blend in {result.output}/{MODEL_DIR}; its weights and scores in "
        f"{result.output}/{BLEND_FILE}"
    )
