"""``bistack cv``: K-fold cross-validation of a classifier, regressor or tagger, as competitors
run it.

The rows of ``data.train`` (a table's rows, a tagger's sentences) are split into folds (a
splitter, :mod:`bistack.folds.splitters`, chosen by what the kind's family offers: a fold column,
groups, classes or a binned target, or plain; written to ``folds.json``). Each fold's model
trains on the other folds and stops early on its own held-out fold (the competitors' practice:
the held-out fold chooses the epoch, so the CV score is a little optimistic), or, with
``inner_dev``, on a dev split of the other folds, so that the held-out fold chooses nothing.
Each fold then predicts the rows it never saw: the out-of-fold predictions, every row once, in
the table's order, scored as a whole (the CV score) and fold by fold. Nothing is fitted on the
rows it is scored on: in the default mode each fold model stays uncalibrated and its held-out
outputs are calibrated by a fit on the other folds' out-of-fold outputs (the family's
``cross_fit``); the ensemble keeps one fit on all of them (:mod:`bistack.cv.finish`).

Folds train one after another, in ``workers`` processes, or as Ray tasks
(:mod:`bistack.cv.runners`), with the same results; the output folder's layout, and how an
earlier CV there is replaced, are :mod:`bistack.cv.folder`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from bistack.config import ExperimentConfig
from bistack.cv.family import Family, family_of
from bistack.cv.finish import finish
from bistack.cv.fold import FoldInputs, FoldJob, finished_fold
from bistack.cv.folder import (
    FOLD_FILE,
    FOLDS_FILE,
    LOG_FILE,
    RESULT_FILE,
    SETTINGS_FILE,
    cv_files,
    fold_dir,
    overwrite_staging,
    refuse_foreign,
    swap_in,
)
from bistack.cv.runners import runner_for
from bistack.data.tables import MEMORY
from bistack.errors import ConfigError
from bistack.files.fingerprints import content_digest
from bistack.files.modeldir import atomic_write, write_json
from bistack.files.paths import refuse_overlap
from bistack.folds.contract import FoldResult, Predictions, Say
from bistack.folds.plan import FoldPlan, plan_folds
from bistack.folds.settings import CVResult, CVSettings, RayCluster, SplitName
from bistack.folds.splitters import splitter_for
from bistack.runs.checkpoint import differences
from bistack.runs.driver import RunOptions
from bistack.runs.rundir import output_lock, shared_lock
from bistack.tasks import config_from_dict, task_of


def cross_validate(
    config: str | Path | dict[str, Any] | ExperimentConfig,
    output: str | Path,
    overrides: dict[str, Any] | None = None,
    *,
    folds: int = 5,
    repeats: int = 1,
    split: SplitName = "auto",
    inner_dev: bool = False,
    workers: int = 1,
    ray: RayCluster | None = None,
    accelerator: str = "auto",
    precision: str | None = None,
    progress: bool = False,
    overwrite: bool = False,
    runs: Sequence[str] = (),
    train_data: Any = None,
    say: Say = print,
) -> CVResult | None:
    """``bistack cv`` from Python (``bistack.cross_validate``): K-fold cross-validation of a
    classifier's, regressor's or tagger's config into ``output`` (out-of-fold predictions,
    scores, the fold ensemble in ``output/model``); a CV started there before goes on from its
    first unfinished fold. Returns its scores (``.cv``, ``.folds``, ``.mean``, ``.std``).
    ``config`` (a YAML path, a dict or a config object), ``overrides``, ``accelerator``,
    ``precision``, ``progress``: as for ``bistack.train``; ``ray``: each fold a Ray task on
    that cluster (``RayCluster()``: the one ``RAY_ADDRESS`` names, else a local Ray);
    ``runs``: the folds this process trains of a CV that processes share (``--runs``: None
    is returned while other folds are unfinished); ``train_data``: the table to split (a
    pandas DataFrame, a ``datasets.Dataset`` or a list of dicts with the config's columns)
    instead of ``data.train``: kept beside the CV as a file of its own, named by its content
    (:func:`kept_table`), which the folds read; the rest as the command's flags."""
    from bistack.training import config_data

    data, source = config_data(config, overrides)
    if train_data is not None:
        section = data.setdefault("data", {})
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: data must be a mapping")
        section |= {"train": str(kept_table(train_data, Path(output), say)), "format": "jsonl"}
    options = RunOptions(accelerator=accelerator, precision=precision, progress=progress)
    settings = CVSettings(folds, repeats, split, inner_dev, workers, ray)
    built = config_from_dict(data, source)
    return run_cv(built, output, settings, options, say, overwrite, tuple(runs))


def run_cv(
    config: ExperimentConfig,
    output: str | Path,
    settings: CVSettings,
    options: RunOptions,
    say: Say = print,
    overwrite: bool = False,
    only: Sequence[str] = (),
) -> CVResult | None:
    """Cross-validate ``config`` into ``output``, each fold trained with ``options``
    (accelerator, precision, progress, log format); a CV started there before with the same
    config, data and settings goes on from its first unfinished fold. ``overwrite``: start
    again over an earlier CV there, which stays until the new one has finished
    (:mod:`bistack.cv.folder`). ``only``: train these folds alone (by name: processes or
    machines sharing one CV), finishing the CV only once every fold has. Every check is made
    before anything is written, and no file bistack did not write is ever deleted. Returns the
    scores (None: folds are left unfinished)."""
    task_of(config.kind)  # an unknown kind named first
    data = config.data
    if data.dev and not settings.seeded:
        raise ConfigError(
            f"data.dev {data.dev}: cross-validation splits data.train into folds and never "
            "reads a dev file; remove it (--set data.dev=null) or merge it into data.train"
        )
    if str(data.train).startswith(MEMORY):
        raise ConfigError("cross-validation reads data.train from a file")
    output = Path(output)
    refuse_overlap(output, config.input_paths(), "the cross-validation's output")
    family = family_of(config)
    family.refuse_settings(settings)
    if only and overwrite:
        raise ConfigError(
            "--runs shares one cross-validation among processes, --overwrite starts one again "
            "in one process: give one of the two"
        )
    if only:  # held shared by every process training folds, each fold under its own lock
        with shared_lock(output, "cross-validation"):
            return cv_in(config, family, output, settings, options, say, overwrite, only)
    with output_lock(output, "cross-validation"):  # a second CV into it is refused, named
        return cv_in(config, family, output, settings, options, say, overwrite, only)


def cv_in(
    config: ExperimentConfig,
    family: Family,
    output: Path,
    settings: CVSettings,
    options: RunOptions,
    say: Say,
    overwrite: bool,
    only: Sequence[str] = (),
) -> CVResult | None:
    """:func:`run_cv` once its config is checked and its output locked."""
    # What a CV is: its config, its settings, and the precision its folds train at.
    record = {
        "config": config.to_dict(),
        "settings": settings.recorded(),
        "run": {"precision": options.precision or "32-true"},
    }
    target = output
    replacing = overwrite and (output / SETTINGS_FILE).is_file()
    refuse_foreign(output, cv_files(family.OOF_FILES), replacing, family.FOLD_FILES)
    if replacing:  # the new CV beside the old one, swapped in when it has finished
        target = overwrite_staging(output, SETTINGS_FILE, record)
    setting_up = (
        output_lock(output, "cross-validation", wait=True, lock="setup") if only else nullcontext()
    )
    with setting_up:  # processes sharing the CV (--runs) set it up one at a time
        plan = fold_plan(config, family, settings, target)
        claim_output(target, record)
        write_json(target / FOLDS_FILE, plan.to_json())
    say = logged(say, target / LOG_FILE)  # the CV's own words, kept beside its results
    names = [name for _, _, name in plan.runs()]
    unknown = [name for name in only if name not in names]
    if unknown:
        raise ConfigError(f"--runs {unknown[0]}: no such fold (this CV's: {', '.join(names)})")
    say(start_line(config, family, plan, settings, options))
    jobs = [
        fold_job(config, target, plan, repeat, fold, name, settings, options)
        for repeat, fold, name in plan.runs()
    ]
    inputs = None
    chosen = [job for job in jobs if not only or job.name in only]
    if any(finished_fold(job, family) is None for job in chosen):  # the folds' shared inputs
        inputs = FoldInputs.of(jobs[0].config, say, family)
    try:
        cross_fitted = family.calibrates and not settings.inner_dev and not settings.seeded
        records = run_folds(jobs, family, settings, say, inputs, only, cross_fitted)
    except KeyboardInterrupt:
        say(
            "interrupted: the same command goes on from the first unfinished fold (the "
            "finished ones are kept)"
        )
        raise
    if only:  # whichever process finds every fold finished pools them, once
        return pool_once(config, family, plan, jobs, records, settings.inner_dev, output, say)
    if len(records) < len(jobs):
        say(unfinished(records, jobs, output))
        return None
    result = finish(config, family, plan, records, settings.inner_dev, target, say, output)
    if target != output:
        swap_in(target, output)
    return result


def pool_once(
    config: ExperimentConfig,
    family: Family,
    plan: FoldPlan,
    jobs: list[FoldJob],
    records: list[FoldResult[Predictions]],
    inner_dev: bool,
    output: Path,
    say: Say,
) -> CVResult | None:
    """Pool a CV that processes share (``--runs``) once every fold has finished, in whichever
    process finds that first: under the CV's lock, each process reads the folds the others
    finished (each wrote its folds' records before taking the lock), and the CV is pooled
    unless it was since its last fold finished."""
    with output_lock(output, "cross-validation", wait=True, lock="setup"):
        found = {record.name: record for record in records}
        for job in jobs:
            if job.name not in found and (record := finished_fold(job, family)) is not None:
                found[job.name] = record
        records = [found[job.name] for job in jobs if job.name in found]
        if len(records) < len(jobs):
            say(unfinished(records, jobs, output))
            return None
        pooled = output / RESULT_FILE
        folds = [fold_dir(output, record.name) / FOLD_FILE for record in records]
        if pooled.is_file() and pooled.stat().st_mtime_ns >= max(
            fold.stat().st_mtime_ns for fold in folds
        ):
            say(f"every fold has finished, and another process pooled them into {output}")
            return None
        return finish(config, family, plan, records, inner_dev, output, say, output)


def unfinished(records: list[FoldResult[Predictions]], jobs: list[FoldJob], output: Path) -> str:
    return (
        f"{len(records)} of {len(jobs)} folds finished in {output}; the CV is finished once "
        "every fold is"
    )


def start_line(
    config: ExperimentConfig,
    family: Family,
    plan: FoldPlan,
    settings: CVSettings,
    options: RunOptions,
) -> str:
    """What the CV says it does, before any fold trains."""
    repeats = f" x {plan.repeats}" if plan.repeats > 1 else ""
    precision = f" at --precision {options.precision}" if options.precision else ""
    stopping = (
        "a dev split of its training folds (the held-out fold chooses nothing)"
        if settings.inner_dev
        else "its held-out fold (the competitors' practice: the held-out fold chooses the "
        "epoch, so the CV score is a little optimistic; --inner-dev for an unbiased one)"
    )
    if plan.seeded:  # one split, trained with a seed a repeat
        return (
            f"{plan.repeats} seed(s), each trained on the training rows of {len(family.rows)} "
            f"{family.ROWS_ARE} and scored on {plan.split.replace(', the others trained on', '')}"
            f"{precision}; each stops early on "
            + ("a dev split of its training rows" if settings.inner_dev else "the dev rows")
        )
    if family.calibrates and not settings.inner_dev:  # as the cross-fit does it
        stopping += (
            "; each fold's calibration is fitted on the other folds' out-of-fold predictions"
        )
    return (
        f"{plan.folds}-fold cross-validation{repeats}{precision} of {len(family.rows)} "
        f"{family.ROWS_ARE} of {config.data.train}, {plan.split}; each fold stops early on "
        f"{stopping}"
    )


def fold_plan(
    config: ExperimentConfig, family: Family, settings: CVSettings, output: Path
) -> FoldPlan:
    """The folds of an earlier run in ``output`` (checked to be of these settings and this
    data), or new ones, dealt by the splitter the family's keys and ``--split`` call for."""
    data = config.data
    digest = content_digest(data.train)
    if data.dev:  # the dev split's rows: the training table's, then the dev table's
        digest = hashlib.sha256(f"{digest}:{content_digest(data.dev)}".encode()).hexdigest()
    rows = len(family.rows)
    written = output / FOLDS_FILE
    if written.is_file():
        plan = FoldPlan.from_json(json.loads(written.read_text()), str(written))
        if plan.data != digest or plan.rows != rows:
            raise ConfigError(
                f"{output}: data.train {data.train} changed since {FOLDS_FILE} was written (its "
                "content differs); start again in another --output, or with --overwrite"
            )
        asked = (settings.folds, settings.repeats, data.split_seed)
        if (plan.folds, plan.repeats, plan.seed) != asked:
            raise ConfigError(
                f"{output}: {FOLDS_FILE} holds {plan.folds} folds x {plan.repeats} (seed "
                f"{plan.seed}), not {asked[0]} x {asked[1]} (seed {asked[2]}); start again in "
                "another --output, or with --overwrite"
            )
        return plan
    splitter = splitter_for(family.split_keys(), settings.split)
    content = hashlib.sha256()
    for row in range(rows):
        content.update(json.dumps(family.row_content(row)).encode() + b"\n")
    return plan_folds(
        settings.folds,
        settings.repeats,
        data.split_seed,
        digest,
        splitter,
        content.hexdigest(),
        settings.seeded,
    )


def kept_table(rows: Any, output: Path, say: Say) -> Path:
    """``rows`` (a table handed over from Python) as JSON lines beside the CV ``output``,
    named by their content (``NAME.table-DIGEST.jsonl``): every fold, worker, Ray task and
    rerun reads the same file; a rerun with the same rows finds it (and the CV goes on), other
    rows make another file (and the CV's own check names the change). Never overwritten."""
    from bistack.training import checked_rows

    table = checked_rows(rows, "train_data")
    records = table.to_dict(orient="records") if hasattr(table, "to_dict") else list(table)
    text = "".join(json.dumps(record, default=plain) + "\n" for record in records)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = output.parent / f"{output.name}.table-{digest}.jsonl"
    if not path.is_file():
        atomic_write(path, lambda temporary: Path(temporary).write_text(text, encoding="utf-8"))
    say(f"the table handed over ({len(records):,} rows) is kept beside the CV as {path}")
    return path


def plain(value: Any) -> Any:
    """A table cell JSON cannot write as it is (a numpy number: its Python value)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"a table cell of type {type(value).__name__} is not text or a number")


def logged(say: Say, log: Path) -> Say:
    """``say``, each line appended to ``log`` as well (``cv.log``: what a CV said, as each
    fold's ``train.log`` keeps what its run said; a resumed CV's lines follow the first's)."""

    def both(text: str) -> None:
        say(text)
        with log.open("a", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")

    return both


def claim_output(output: Path, record: dict[str, dict[str, Any]]) -> None:
    """Record what this CV is (``record``: its config and settings); an output holding another
    config's or settings' CV is refused, naming what changed (its finished folds would not be
    this CV's)."""
    written = output / SETTINGS_FILE
    if written.is_file():
        before = json.loads(written.read_text())
        changed = differences(before.get("config", {}), record["config"])
        for section in ("settings", "run"):  # a CV of an earlier version has no "run"
            kept = before.get(section, {} if section == "settings" else record[section])
            changed += [
                f"--{key.replace('_', '-')}"
                for key, value in record[section].items()
                if kept.get(key) != value
            ]
        if changed:
            raise ConfigError(
                f"{output} holds a cross-validation of another config or settings (changed: "
                f"{', '.join(changed)}); its finished folds are not this one's: start again in "
                "another --output, or with --overwrite"
            )
    elif output.exists() and any(output.iterdir()):
        raise ConfigError(
            f"{output} holds files bistack cv did not write; choose a new or empty folder"
        )
    write_json(written, record)


def fold_job(
    config: ExperimentConfig,
    output: Path,
    plan: FoldPlan,
    repeat: int,
    fold: int,
    name: str,
    settings: CVSettings,
    options: RunOptions,
) -> FoldJob:
    """Fold ``fold`` of repeat ``repeat``: its rows, the rows that choose its epoch, and where
    it trains."""
    train, held = plan.training(repeat, fold), plan.held_out(repeat, fold)
    data = config.data
    if settings.inner_dev:
        train, dev = plan.inner_dev(repeat, fold, data.dev_fraction, data.split_seed)
        source = f"{data.train} ({name}: dev split of the other folds)"
    else:
        dev, source = held, f"{data.train} ({name}: its held-out fold)"
    seed = None
    if plan.seeded:  # each repeat of the dev split trains with a seed of its own
        seed = config.train.seed + repeat
        source = f"{data.dev or data.train} ({name}: the dev rows)"
    return FoldJob(
        config.to_dict(),
        str(fold_dir(output, name)),
        name,
        sorted(train),
        sorted(dev),
        held,
        source,
        replace(options, overwrite=True, resume=False, checkpoints=False),
        calibrate_on_dev=settings.inner_dev,
        seed=seed,
    )


def run_folds(
    jobs: list[FoldJob],
    family: Family,
    settings: CVSettings,
    say: Say,
    inputs: FoldInputs | None = None,
    only: Sequence[str] = (),
    cross_fitted: bool = False,
) -> list[FoldResult[Predictions]]:
    """Each fold's record: read where it finished before (by ``family``), else trained by the
    runner the settings ask for (with ``inputs``, when made already); ``only``: the folds to
    train (the others' records only where they finished), every fold when empty."""
    records: dict[str, FoldResult[Predictions]] = {}
    todo = []
    for job in jobs:
        record = finished_fold(job, family)
        if record is None and (not only or job.name in only):
            todo.append(job)
        elif record is None:
            continue
        else:
            records[job.name] = record
            say(f"{job.name}: finished before{fold_score(record, cross_fitted)}")
    if todo:
        runner = runner_for(settings.workers, settings.ray, len(todo))
        for job, record in runner.run(todo, say, inputs):
            records[job.name] = record
            step = f", step {record.best_step}" if record.best_step else ""
            say(
                f"{job.name}: trained, best epoch {record.best_epoch}{step}"
                f"{fold_score(record, cross_fitted)}"
            )
    return [records[job.name] for job in jobs if job.name in records]


def fold_score(record: FoldResult[Predictions], cross_fitted: bool) -> str:
    """How a finished fold's line shows its score: as trained, or (where the fold is to be
    calibrated on the other folds' out-of-fold predictions) that it is scored then, so that a
    fold shows one score wherever it shows one."""
    if cross_fitted:
        return "; scored cross-fitted once every fold has finished"
    return f"; score {record.score:.4f}"
