"""``bistack cv``: K-fold cross-validation of a classifier, regressor or tagger, as competitors
run it.

The rows of ``data.train`` (a table's rows, a tagger's sentences) are split into folds
(``bistack.data.folds``, as the kind's family says: stratified by class, binned target or entity
type, grouped by ``data.group_column`` or by document, or plain; written to ``folds.json``). Each
fold's model trains on the other folds and stops early on its own held-out fold (the
competitors' practice: the held-out fold chooses the epoch, so the CV score is a little
optimistic), or, with ``inner_dev``, on a dev split of the other folds (the rule
compare-poolers uses), so that the held-out fold chooses nothing. Each fold then predicts the
rows it never saw: the out-of-fold predictions, every row once, in the table's order, scored
as a whole (the CV score) and fold by fold. Nothing is fitted on the rows it is scored on: in
the default mode each fold model stays uncalibrated and its held-out outputs are calibrated by
a fit on the other folds' out-of-fold outputs (the family's ``cross_fit``); the ensemble keeps
one fit on all of them.

The output folder holds ``folds.json``, ``folds/<fold>/`` (each fold's run, and ``fold.json``
once it finished: a killed CV resumes at the first fold without one), ``oof.jsonl`` and
``oof.csv`` (a tagger's: ``oof.conll``), ``cv.json`` (the scores), ``cv_report/`` (the folds'
scores, and the kind's report on the out-of-fold predictions where its family gives one) and
``model/``: the fold models as one ensemble, which every outlet opens like any model. Folds
train one after another, in ``workers`` processes, or as Ray tasks, with the same results.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol

from bistack.cards import resolve
from bistack.config import ExperimentConfig
from bistack.data.folds import FoldPlan, plan_folds
from bistack.data.splits import split_off_dev
from bistack.data.tables import MEMORY
from bistack.errors import ConfigError, needs_extra
from bistack.files.ensemble_dir import write_ensemble
from bistack.files.fingerprints import content_digest
from bistack.files.modeldir import write_json
from bistack.files.paths import refuse_overlap
from bistack.runs.checkpoint import differences
from bistack.runs.driver import RunOptions
from bistack.runs.rundir import output_lock
from bistack.studies.cv_folder import overwrite_staging, refuse_foreign, swap_in
from bistack.tasks import TASKS, config_from_dict, task_of

FOLDS_FILE, SETTINGS_FILE, FOLD_FILE = "folds.json", "cv-settings.json", "fold.json"
RESULT_FILE, REPORT_DIR, MODEL_DIR = "cv.json", "cv_report", "model"
# Everything a CV writes in its output (the settings first: what claims a folder as a CV's).
CV_FILES = (
    SETTINGS_FILE,
    FOLDS_FILE,
    "folds",
    "oof.jsonl",
    "oof.csv",
    "oof.conll",
    RESULT_FILE,
    REPORT_DIR,
    MODEL_DIR,
)


@dataclass(frozen=True)
class CVSettings:
    """folds, repeats: K and R; split: ``auto`` (as the kind's family splits: stratified,
    or grouped by ``data.group_column`` or document) or ``plain``; inner_dev: stop each fold
    on a dev split of its training folds instead of its held-out fold; workers: folds trained
    at once, each in its own process; ray: each fold a Ray task."""

    folds: int
    repeats: int = 1
    split: str = "auto"
    inner_dev: bool = False
    workers: int = 1
    ray: bool = False  # folds as Ray tasks (the cluster RAY_ADDRESS names, else a local Ray)
    ray_address: str | None = None  # the cluster's address, over RAY_ADDRESS

    def __post_init__(self) -> None:
        if self.split not in ("auto", "plain"):
            raise ConfigError(f"split {self.split!r}: auto or plain")
        if self.workers < 1:
            raise ConfigError(f"--workers {self.workers}: at least 1")
        if self.ray_address and not self.ray:
            raise ConfigError("a Ray address is for --ray")
        if self.ray and self.workers > 1:
            raise ConfigError("--ray runs each fold as a Ray task; --workers is for one machine")

    def recorded(self) -> dict[str, Any]:
        """What must match for an output to be resumed (not ``workers`` or ``ray``: results
        are alike)."""
        return {
            "folds": self.folds,
            "repeats": self.repeats,
            "split": self.split,
            "inner_dev": self.inner_dev,
        }


@dataclass(frozen=True)
class CVResult:
    """The scores: ``cv`` on the pooled out-of-fold predictions (mean over repeats), each
    fold's on its held-out rows, their mean and standard deviation; where it all is."""

    metric: str
    cv: float
    folds: dict[str, float]
    output: Path

    @property
    def mean(self) -> float:
        return statistics.fmean(self.folds.values())

    @property
    def std(self) -> float:
        return statistics.stdev(self.folds.values()) if len(self.folds) > 1 else 0.0


@dataclass(frozen=True)
class FoldJob:
    """One fold's run, as plain data a worker process takes."""

    config: dict[str, Any]
    directory: str
    name: str
    train: list[int]
    dev: list[int]  # the rows that choose the epoch: the held-out fold, or an inner dev split
    held: list[int]
    dev_source: str
    options: RunOptions
    calibrate_on_dev: bool  # false where dev is the held-out fold: nothing is fitted on it


def is_cv_entry(name: str) -> bool:
    """Whether an output folder's entry is one a CV writes (or stages, beside its place)."""
    return name in CV_FILES or any(name.startswith(f".{written}.") for written in CV_FILES)


class FoldFamily(Protocol):
    """What cross-validation needs of a kind's family (its card's ``cv``, built with the
    config and the kind's model class): the rows (``rows``, read and checked when built), how
    to split them, the inputs of each fold's training, each fold's held-out record, and the
    pooled out-of-fold predictions, their files and report."""

    config: Any
    rows: Sequence[Any]
    OOF_FILES: tuple[str, ...]  # what ``write_oof`` writes
    ROWS_ARE: str  # what its rows are, in messages ("rows", "sentences")

    def split(self, folds: int, plain: bool) -> dict[str, Any]: ...
    def refuse(self, settings: CVSettings) -> None: ...
    def shared(self, say: Callable[[str], None]) -> dict[str, Any]: ...
    def training(
        self,
        train: list[int],
        dev: list[int],
        source: str,
        shared: dict[str, Any],
        calibrate_on_dev: bool,
    ) -> dict[str, Any]: ...
    def parts(self, shared: dict[str, Any]) -> dict[str, Any]: ...
    def held_out(
        self, model: Any, held: list[int], shared: dict[str, Any], key: str
    ) -> dict[str, Any]: ...
    def pool(self, plan: FoldPlan, records: list[dict], key: str) -> tuple[list[float], Any]: ...
    def cross_fit(
        self,
        plan: FoldPlan,
        records: list[dict],
        key: str,
        members: dict[str, Path],
        say: Callable[[str], None],
    ) -> list[dict]: ...
    def ensemble_meta(
        self,
        oof: Any,
        members: dict[str, Path],
        records: list[dict],
        say: Callable[[str], None],
        members_calibrated: bool,
    ) -> tuple[dict[str, Any], str]: ...
    def write_oof(self, output: Path, card: Any, plan: FoldPlan, oof: Any) -> None: ...
    def report(self, card: Any, oof: Any, model_dir: Path) -> dict[str, Any] | None: ...


def family_of(config: Any) -> FoldFamily:
    """The fold family of ``config``'s kind, its rows read and checked; a kind its card does
    not cross-validate is refused, saying which are."""
    card = task_of(config.kind)
    if card.cv is None:
        kinds = ", ".join(sorted(kind for kind, c in TASKS.items() if c.cv is not None))
        raise ConfigError(
            f"cross-validation trains {kinds}; {card.description} is not cross-validated"
        )
    return resolve(card.cv)(config, card.loader_class)


def cross_validate(
    config: str | Path | dict[str, Any] | ExperimentConfig,
    output: str | Path,
    overrides: dict[str, Any] | None = None,
    *,
    folds: int = 5,
    repeats: int = 1,
    split: str = "auto",
    inner_dev: bool = False,
    workers: int = 1,
    ray: bool | str = False,
    accelerator: str = "auto",
    precision: str | None = None,
    progress: bool = False,
    overwrite: bool = False,
    say: Callable[[str], None] = print,
) -> CVResult:
    """``bistack cv`` from Python (``bistack.cross_validate``): K-fold cross-validation of a
    classifier's, regressor's or tagger's config into ``output`` (out-of-fold predictions,
    scores, the fold ensemble in ``output/model``); a CV started there before goes on from its
    first unfinished fold. Returns its scores (``.cv``, ``.folds``, ``.mean``, ``.std``).
    ``config`` (a YAML path, a dict or a config object), ``overrides``, ``accelerator``,
    ``precision``, ``progress``: as for ``bistack.train``; the rest as the command's flags."""
    from bistack.training import config_data

    data, source = config_data(config, overrides)
    options = RunOptions(accelerator=accelerator, precision=precision, progress=progress)
    address = ray if isinstance(ray, str) and ray else None  # else RAY_ADDRESS, or a local Ray
    settings = CVSettings(folds, repeats, split, inner_dev, workers, bool(ray), address)
    return run_cv(config_from_dict(data, source), output, settings, options, say, overwrite)


def run_cv(
    config: Any,
    output: str | Path,
    settings: CVSettings,
    options: RunOptions,
    say: Callable[[str], None] = print,
    overwrite: bool = False,
) -> CVResult:
    """Cross-validate ``config`` into ``output``, each fold trained with ``options``
    (accelerator, precision, progress, log format); a CV started there before with the same
    config, data and settings goes on from its first unfinished fold. ``overwrite``: start
    again over an earlier CV there, which stays until the new one has finished
    (``bistack.studies.cv_folder``). Every check is made before anything is written, and no
    file bistack did not write is ever deleted. Returns the scores."""
    task_of(config.kind)  # an unknown kind named first
    data = config.data
    if data.dev:
        raise ConfigError(
            f"data.dev {data.dev}: cross-validation splits data.train into folds and never "
            "reads a dev file; remove it (--set data.dev=null) or merge it into data.train"
        )
    if str(data.train).startswith(MEMORY):
        raise ConfigError("cross-validation reads data.train from a file")
    output = Path(output)
    refuse_overlap(output, config.input_paths(), "the cross-validation's output")
    family = family_of(config)
    family.refuse(settings)
    with output_lock(output, "cross-validation"):  # a second CV into it is refused, named
        return cv_in(config, family, output, settings, options, say, overwrite)


def cv_in(
    config: Any,
    family: FoldFamily,
    output: Path,
    settings: CVSettings,
    options: RunOptions,
    say: Callable[[str], None],
    overwrite: bool,
) -> CVResult:
    """:func:`run_cv` once its config is checked and its output locked."""
    data = config.data
    record = {"config": config.to_dict(), "settings": settings.recorded()}
    target = output
    replacing = overwrite and (output / SETTINGS_FILE).is_file()
    refuse_foreign(output, CV_FILES, whole=replacing)
    if replacing:  # the new CV beside the old one, swapped in when it has finished
        target = overwrite_staging(output, SETTINGS_FILE, record)
    plan = fold_plan(config, family, settings, target)
    claim_output(target, record)
    write_json(target / FOLDS_FILE, plan.to_json())
    say(
        f"{plan.folds}-fold cross-validation{f' x {plan.repeats}' if plan.repeats > 1 else ''} "
        f"of {len(family.rows)} {family.ROWS_ARE} of {data.train}, {plan.split}; each fold stops "
        "early on "
        + (
            "a dev split of its training folds (the held-out fold chooses nothing)"
            if settings.inner_dev
            else "its held-out fold (the competitors' practice: the held-out fold chooses the "
            "epoch, so the CV score is a little optimistic; --inner-dev for an unbiased one); "
            "each fold's calibration is fitted on the other folds' out-of-fold predictions"
        )
    )
    jobs = [
        fold_job(config, target, plan, repeat, fold, name, settings, options)
        for repeat, fold, name in plan.runs()
    ]
    inputs = None
    if any(finished_fold(job) is None for job in jobs):  # what the folds share, said here
        inputs = fold_inputs(jobs[0].config, say, family)
    try:
        records = run_folds(jobs, settings, say, inputs)
    except KeyboardInterrupt:
        say(
            "interrupted: the same command goes on from the first unfinished fold (the "
            "finished ones are kept)"
        )
        raise
    result = finish(config, family, plan, records, settings, target, say, output)
    if target != output:
        swap_in(target, output)
    return result


def fold_plan(config: Any, family: FoldFamily, settings: CVSettings, output: Path) -> FoldPlan:
    """The folds of an earlier run in ``output`` (checked to be of these settings and this
    data), or new ones."""
    data = config.data
    digest = content_digest(data.train)
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
    how = family.split(settings.folds, settings.split == "plain")
    return plan_folds(settings.folds, settings.repeats, data.split_seed, digest, **how)


def claim_output(output: Path, record: dict[str, Any]) -> None:
    """Record what this CV is (``record``: its config and settings); an output holding another
    config's or settings' CV is refused, naming what changed (its finished folds would not be
    this CV's)."""
    written = output / SETTINGS_FILE
    if written.is_file():
        before = json.loads(written.read_text())
        changed = differences(before.get("config", {}), record["config"])
        changed += [
            f"--{key.replace('_', '-')}"
            for key, value in record["settings"].items()
            if before.get("settings", {}).get(key) != value
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
    config: Any,
    output: Path,
    plan: FoldPlan,
    repeat: int,
    fold: int,
    name: str,
    settings: CVSettings,
    options: RunOptions,
) -> FoldJob:
    train, held = plan.training(repeat, fold), plan.held_out(repeat, fold)
    data = config.data
    if settings.inner_dev:
        train, dev = split_off_dev(train, data.dev_fraction, data.split_seed)
        source = f"{data.train} ({name}: dev split of the other folds)"
    else:
        dev, source = held, f"{data.train} ({name}: its held-out fold)"
    return FoldJob(
        config.to_dict(),
        str(output / "folds" / name),
        name,
        sorted(train),
        sorted(dev),
        held,
        source,
        replace(options, overwrite=True, resume=False, checkpoints=False),
        calibrate_on_dev=settings.inner_dev,
    )


def run_folds(
    jobs: list[FoldJob],
    settings: CVSettings,
    say: Callable[[str], None],
    inputs: FoldInputs | None = None,
) -> list[dict]:
    """Each fold's record: read where it finished before, else trained here (with ``inputs``,
    when made already), in one of ``settings.workers`` processes, or as Ray tasks."""
    workers = settings.workers
    records: dict[str, dict] = {}
    todo = []
    for job in jobs:
        record = finished_fold(job)
        if record is None:
            todo.append(job)
        else:
            records[job.name] = record
            say(f"{job.name}: finished before, score {record['score']:.4f}")
    if settings.ray and todo:
        for job, record in zip(todo, on_ray_cluster(todo, settings.ray_address), strict=True):
            records[job.name] = record
            say(f"{job.name}: score {record['score']:.4f} (best epoch {record['best_epoch']})")
    elif workers > 1 and len(todo) > 1:
        import torch

        count = min(workers, len(todo))
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus > 1:  # the folds dealt over the GPUs, one device each
            todo = [on_device(job, index % gpus) for index, job in enumerate(todo)]
        threads = max(1, torch.get_num_threads() // count)
        with ProcessPoolExecutor(
            count,
            mp_context=get_context("spawn"),
            initializer=torch.set_num_threads,
            initargs=(threads,),
        ) as pool:
            for job, record in zip(todo, pool.map(train_fold, todo), strict=True):
                records[job.name] = record
                say(f"{job.name}: score {record['score']:.4f} (best epoch {record['best_epoch']})")
    else:
        for job in todo:
            record = train_fold(job, say, inputs)
            records[job.name] = record
            say(f"{job.name}: score {record['score']:.4f} (best epoch {record['best_epoch']})")
    return [records[job.name] for job in jobs]


def on_ray_cluster(jobs: list[FoldJob], address: str | None = None) -> list[dict]:
    """The folds' records, each fold trained as a Ray task (``torch``'s threads of this
    process as its CPUs, a GPU when the cluster has them) on the cluster at ``address``, else
    the one ``RAY_ADDRESS`` names, else a local Ray (a Ray this process joined already: that
    one); every node must see the output folder (shared storage)."""
    try:
        import ray
    except ImportError as error:
        raise ConfigError(needs_extra("cv --ray", "ray", error)) from None
    import torch

    if not ray.is_initialized():  # with no address, Ray reads RAY_ADDRESS itself
        ray.init(address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    threads = torch.get_num_threads()
    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
    task = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=0)(train_fold_alone)
    return list(ray.get([task.remote(job, threads) for job in jobs]))


def train_fold_alone(job: FoldJob, threads: int) -> dict:
    """:func:`train_fold` in a process of its own (a Ray worker) with ``threads`` threads."""
    import torch

    torch.set_num_threads(threads)
    return train_fold(job)


def on_device(job: FoldJob, index: int) -> FoldJob:
    """``job`` trained on GPU ``index`` (Fabric's ``"N,"``: that device, not N of them)."""
    return replace(job, options=replace(job.options, devices=f"{index},"))


def finished_fold(job: FoldJob) -> dict | None:
    """The record of a fold that finished with these rows, its model as it left it; a model
    changed since (edited by hand, partly deleted) is an error saying how to retrain it."""
    written = Path(job.directory) / FOLD_FILE
    if not written.is_file():
        return None
    record = json.loads(written.read_text())
    if record.get("train") != job.train or record.get("held") != job.held:
        return None
    model = Path(job.directory) / MODEL_DIR
    if record.get("model") != content_digest(model):
        raise ConfigError(
            f"{job.directory}: its model changed since the fold finished (edited, or partly "
            f"deleted); delete {job.directory} to train that fold again"
        )
    return record


def train_fold(
    job: FoldJob, say: Callable[[str], None] | None = None, inputs: FoldInputs | None = None
) -> dict:
    """Train one fold and predict its held-out rows; its record, also written to
    ``fold.json`` (last, so that only a finished fold has one). ``inputs``: the config, its
    family and what the folds share, made once for the folds one process trains in a row."""
    from bistack.training import train_config

    config, family, shared = inputs or fold_inputs(job.config, say or (lambda _: None))
    card = task_of(config.kind)
    trained = train_config(
        config,
        job.directory,
        job.options,
        **family.training(job.train, job.dev, job.dev_source, shared, job.calibrate_on_dev),
    )
    model = card.loader_class.load(trained.model_dir, **family.parts(shared))
    key = card.metric_for(config).column.removeprefix("dev_")
    record: dict[str, Any] = {"name": job.name, "train": job.train, "held": job.held}
    record |= family.held_out(model, job.held, shared, key)
    record |= {"best_epoch": trained.fit.best_epoch, "model": content_digest(trained.model_dir)}
    write_json(Path(job.directory) / FOLD_FILE, record)
    return record


# The config, its fold family (rows read) and what every fold shares.
FoldInputs = tuple[Any, FoldFamily, dict[str, Any]]


def fold_inputs(
    config: dict[str, Any], say: Callable[[str], None], family: FoldFamily | None = None
) -> FoldInputs:
    """What training a fold of ``config`` needs besides its rows; ``family``: one already
    built from this config."""
    built = config_from_dict(config)
    chosen = family if family is not None else family_of(built)
    return built, chosen, chosen.shared(say)


def finish(
    config: Any,
    family: FoldFamily,
    plan: FoldPlan,
    records: list[dict],
    settings: CVSettings,
    output: Path,
    say: Callable[[str], None],
    shown: Path,
) -> CVResult:
    """Pool the out-of-fold predictions, score them, write them, the report and the ensemble
    into ``output`` (``shown``: where they will be, to name in messages)."""
    card = task_of(config.kind)
    key = card.metric_for(config).column.removeprefix("dev_")
    members = {r["name"]: output / "folds" / r["name"] / MODEL_DIR for r in records}
    trained = records  # as the members predict: calibrated on an inner dev split, or not at all
    if not settings.inner_dev:  # calibrated now, each fold by the other folds' predictions
        records = family.cross_fit(plan, trained, key, members, say)
    pooled, oof = family.pool(plan, records, key)
    as_trained = oof if records is trained else family.pool(plan, trained, key)[1]
    folds = {record["name"]: float(record["score"]) for record in records}
    result = CVResult(key, statistics.fmean(pooled), folds, shown)
    summary = {
        "metric": key,
        "cv": result.cv,
        "cv_per_repeat": pooled,
        "folds": folds,
        "fold_mean": result.mean,
        "fold_std": result.std,
        "rows": len(family.rows),
        "split": plan.split,
        "early_stopping": "a dev split of the training folds"
        if settings.inner_dev
        else "the held-out fold",
        "calibration": "each fold's on a dev split of its training folds"
        if settings.inner_dev
        else "each fold's on the other folds' out-of-fold predictions (cross-fitted), never "
        "on its own held-out rows; the ensemble's on all the out-of-fold predictions",
        "fold_calibration": {r["name"]: r["calibration"] for r in records if "calibration" in r},
    }
    extra, note = family.ensemble_meta(as_trained, members, trained, say, settings.inner_dev)
    cv = {name: value for name, value in summary.items() if name != "folds"}
    meta: dict[str, Any] = {"kind": config.kind, "folds": folds, "cv": cv} | extra
    family.write_oof(output, card, plan, oof)
    write_json(output / RESULT_FILE, summary)
    write_ensemble(output / MODEL_DIR, members, meta)
    write_cv_report(output, card, family, oof, summary, shown)
    say(
        f"CV {key} {result.cv:.4f} on the pooled out-of-fold predictions; folds "
        f"{result.mean:.4f} +- {result.std:.4f} ({', '.join(f'{v:.4f}' for v in folds.values())})"
    )
    if note:
        say(note)
    written = " and ".join(family.OOF_FILES)
    say(f"out-of-fold predictions in {shown}/{written}; the ensemble in {shown}/{MODEL_DIR}")
    return result


def write_cv_report(
    output: Path, card: Any, family: FoldFamily, oof: Any, summary: dict[str, Any], shown: Path
) -> None:
    """``cv_report/``: the folds' scores, then the kind's report (as ``evaluate --report``
    draws it) of the out-of-fold predictions, where its family gives one."""
    from bistack.reports.write import write_pages

    path = family.config.data.train
    folds = summary["folds"]
    metric = summary["metric"]
    first = {
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
    section = family.report(card, oof, output / MODEL_DIR)
    if section is not None:
        sections.append({"data": f"{path} (out-of-fold predictions)", "kind": card.kind, **section})
    record = {"cv": str(shown), "kind": card.kind}
    title = f"Cross-validation of {card.description}: {shown}"
    report = output / REPORT_DIR
    write_pages(report, title, record, sections, report.exists)
