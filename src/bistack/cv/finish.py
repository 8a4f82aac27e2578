"""A cross-validation's end: the folds' held-out predictions calibrated (cross-fitted) and
pooled, scored, written (the out-of-fold files, ``cv.json``, ``cv_report/``), and the fold
models kept as one ensemble (``model/``) that every outlet opens like any model."""

from __future__ import annotations

import statistics
from pathlib import Path

from bistack.cards import Card
from bistack.config import ExperimentConfig
from bistack.cv.family import Family
from bistack.cv.folder import MODEL_DIR, REPORT_DIR, RESULT_FILE, fold_dir
from bistack.files.ensemble_dir import write_ensemble
from bistack.files.modeldir import write_json
from bistack.folds.contract import JSON, CVSummary, FoldResult, Predictions, Say
from bistack.folds.plan import FoldPlan
from bistack.folds.settings import CVResult
from bistack.tasks import task_of


def finish(
    config: ExperimentConfig,
    family: Family,
    plan: FoldPlan,
    records: list[FoldResult[Predictions]],
    inner_dev: bool,
    output: Path,
    say: Say,
    shown: Path,
) -> CVResult:
    """Pool the out-of-fold predictions, score them, write them, the report and the ensemble
    into ``output`` (``shown``: where they will be, to name in messages). ``inner_dev``: each
    fold calibrated itself on a dev split of its training folds (else it is cross-fitted
    here)."""
    card = task_of(config.kind)
    metric = card.metric_for(config).column.removeprefix("dev_")
    members = {r.name: fold_dir(output, r.name) / MODEL_DIR for r in records}
    trained = records  # as the members predict: calibrated on an inner dev split, or not at all
    if not inner_dev and not plan.seeded:  # calibrated now, by the other folds' predictions
        records = family.cross_fit(plan, trained, metric, members, say)
    cross_fitted = records is not trained
    if cross_fitted:
        for record in records:
            say(f"{record.name}: cross-fitted {metric} {record.score:.4f}")
    pool = family.pool_out_of_fold(plan, records, metric)
    pooled, oof = pool.scores, pool.pooled
    as_trained = (
        oof if records is trained else family.pool_out_of_fold(plan, trained, metric).pooled
    )
    folds = {record.name: float(record.score) for record in records}
    result = CVResult(metric, statistics.fmean(pooled), folds, shown)
    summary: CVSummary = {
        "metric": metric,
        "cv": result.cv,
        "cv_per_repeat": pooled,
        "folds": folds,
        "folds_scored": "cross-fitted: each fold's held-out predictions calibrated on the other "
        "folds' out-of-fold predictions"
        if cross_fitted
        else "as trained",
        "fold_mean": result.mean,
        "fold_std": result.std,
        "rows": len(family.rows),
        "rows_are": family.ROWS_ARE,
        "rows_scored": len(plan.held_rows(0)),
        "split": plan.split,
        "early_stopping": "a dev split of the training folds" if inner_dev else "the held-out fold",
        "calibration": "none: the model calibrates nothing"
        if not family.calibrates
        else "each fold's on a dev split of its training folds"
        if inner_dev
        else "none: each seed's outputs as trained (no fold but its own to fit on); the "
        "ensemble's on all the out-of-fold predictions"
        if plan.seeded
        else "each fold's on the other folds' out-of-fold predictions (cross-fitted), never "
        "on its own held-out rows; the ensemble's on all the out-of-fold predictions",
        "fold_calibration": {r.name: r.calibration for r in records if r.calibration is not None},
    }
    serving, served = served_members(plan, trained)
    kept = {record.name: members[record.name] for record in serving}
    fit = family.ensemble_settings(as_trained, oof, kept, serving, say, inner_dev)
    cv = {name: value for name, value in summary.items() if name != "folds"}
    meta: JSON = {"kind": config.kind, "folds": folds, "cv": cv, "served": served} | fit.meta
    oof_files = family.write_oof(output, plan, fit.oof)
    write_json(output / RESULT_FILE, summary)
    write_ensemble(output / MODEL_DIR, kept, meta)
    write_cv_report(output, card, config, family, fit.oof, summary, shown)
    say(
        f"CV {metric} {result.cv:.4f} on the pooled out-of-fold predictions; folds"
        f"{' (cross-fitted)' if cross_fitted else ''} "
        f"{result.mean:.4f} +- {result.std:.4f} ({', '.join(f'{v:.4f}' for v in folds.values())})"
    )
    if fit.note:
        say(fit.note)
    written = " and ".join(
        [", ".join(oof_files[:-1]), oof_files[-1]] if len(oof_files) > 2 else oof_files
    )
    say(f"out-of-fold predictions in {shown}/{written}; the ensemble in {shown}/{MODEL_DIR}")
    say(f"the ensemble serves {served}")
    return result


def served_members(
    plan: FoldPlan, records: list[FoldResult[Predictions]]
) -> tuple[list[FoldResult[Predictions]], str]:
    """The fold models the CV's ensemble serves, and which, in words: every fold's, averaged;
    of forward chaining (a time split), the last fold's alone, which trained on every block
    before the last (an average would weigh the first fold's model, trained on the oldest
    block alone, as much as it)."""
    if not plan.forward_chaining:
        return records, f"the mean of its {len(records)} fold models"
    last = records[-1]
    return [last], (
        f"{last.name} alone: a time split's last fold, trained on the {len(last.train)} rows "
        "before its block (the most and the latest); the earlier folds' models, trained on "
        "fewer and older rows, score the CV but are not averaged in"
    )


def write_cv_report(
    output: Path,
    card: Card,
    config: ExperimentConfig,
    family: Family,
    oof: object,
    summary: CVSummary,
    shown: Path,
) -> None:
    """``cv_report/``: the folds' scores, then the kind's report (as ``evaluate --report``
    draws it) of the out-of-fold predictions, where its family gives one."""
    from bistack.reports.write import write_pages

    path = config.data.train
    folds = summary["folds"]
    metric = summary["metric"]
    first: JSON = {
        "data": f"{path}: {len(folds)} folds, {summary['split']}",
        "kind": card.kind,
        "scores": {
            f"CV {metric}": summary["cv"],
            f"fold mean {metric}": summary["fold_mean"],
            "fold standard deviation": summary["fold_std"],
        },
        "summary": f"early stopping on {summary['early_stopping']}; {summary['rows']} "
        f"{family.ROWS_ARE}",
        "tables": [
            {
                "title": "each fold's score on its held-out rows",
                "columns": ["fold", metric],
                "rows": [[name, score] for name, score in folds.items()],
            }
        ],
        "figures": [],
        "notes": [],
    }
    sections = [first]
    section = family.oof_report(oof, output / MODEL_DIR)
    if section is not None:
        sections.append({"data": f"{path} (out-of-fold predictions)", "kind": card.kind, **section})
    record = {"cv": str(shown), "kind": card.kind}
    title = f"Cross-validation of {card.description}: {shown}"
    report = output / REPORT_DIR
    write_pages(report, title, record, sections, report.exists)
