"""``bistack tune``: a hyperparameter search on Optuna, and a verdict held to the seed noise.

Each trial is an ordinary run of the one training driver (its model directory, metrics and lock
under ``trials/trial-NNNN``), its config the starting one with the space's values
(``bistack.studies.search_space``). Optuna's TPE sampler proposes values; its median pruner stops
a trial whose dev metric after an epoch is below the median of earlier trials at that epoch.
The first trial is the starting config itself when its values lie in the space, so a search
starts from what the user has.

The study lives in a database (an SQLite file in the output folder by default, or any URL
Optuna takes), so an interrupted search resumes where it stopped and several processes or
machines share one. A trial counts once it ran to an end (complete, pruned, or failed with an
error); an interrupted trial (Ctrl-C, a kill, a machine that stopped answering) is recorded as
such and its values are tried again. Numbers are the database's, so however many processes
ask at once, exactly ``trials`` trials count.

After the search the best trial's config and the starting config are each trained with
``seeds`` seeds, and the verdict says whether the gain exceeds the seed noise of the difference
(the ladder's rule): the search picked the best of many single runs on dev, and only new seeds
say how much of its lead was luck.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bistack.config import ExperimentConfig
from bistack.errors import BistackError, ConfigError, needs_extra
from bistack.files.modeldir import atomic_write
from bistack.files.paths import refuse_overlap
from bistack.metrics.dev import Metric
from bistack.runs.checkpoint import differences
from bistack.runs.driver import RunOptions
from bistack.runs.rundir import output_lock
from bistack.studies.search_space import Parameter, verdict_config, with_value
from bistack.studies.tune_results import write_report
from bistack.studies.tune_verdict import (
    best_config,
    format_value,
    judge_best,
    trial_output,
    trial_rows,
)
from bistack.studies.tune_workers import heartbeat, reclaim_interrupted, run_workers, worker_id
from bistack.tasks import task_of
from bistack.training import train_config as train

STUDY_FILE = "study.db"
LOG = "tune.log"


@dataclass(frozen=True)
class TuneSettings:
    """trials: how many count (see the module's docstring); seeds: per config in the verdict
    (0: no verdict); storage: an Optuna database URL (None: SQLite in the output); startup:
    trials drawn at random before TPE models the space, and completed before pruning starts;
    prune: stop hopeless trials; sampler_seed: TPE's seed (None: random; two processes with one
    seed would propose the same values); verdict_set: ``key=value`` overrides of both configs
    in the verdict (say, the full epoch budget after trials on a short one); accelerator,
    precision: where and how each run trains (``bistack train``'s flags)."""

    trials: int
    seeds: int = 3
    storage: str | None = None
    study_name: str = "tune"
    startup: int = 5
    prune: bool = True
    sampler_seed: int | None = None
    verdict_set: tuple[str, ...] = ()
    accelerator: str = "auto"
    precision: str | None = None

    def run_options(self) -> RunOptions:
        """How each trial and verdict run trains: no checkpoints (a run that did not finish is
        run again), on the accelerator and at the precision asked."""
        return RunOptions(
            progress=False,
            overwrite=True,
            checkpoints=False,
            accelerator=self.accelerator,
            precision=self.precision,
        )


def storage_url(output: Path, storage: str | None) -> str:
    return storage or f"sqlite:///{(output / STUDY_FILE).resolve()}"


def worker_settings(output: Path, settings: TuneSettings, index: int) -> TuneSettings:
    """The settings of worker process ``index`` of a search: the same study (its database
    named outright), and a sampler seed of its own (one seed for all would repeat values)."""
    seed = None if settings.sampler_seed is None else settings.sampler_seed + index
    return dataclasses.replace(
        settings, storage=storage_url(output, settings.storage), sampler_seed=seed
    )


def tune(
    config: ExperimentConfig,
    space: list[Parameter],
    output: str | Path,
    settings: TuneSettings,
    *,
    workers: int = 1,
    threads: int = 1,
    worker: Callable[..., None] | None = None,
    report: bool = True,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Search ``space`` from ``config`` until ``settings.trials`` trials count, then (with
    ``report``) the verdict and ``tune.md``/``tune.json``/PNGs/``best.yaml`` in ``output``;
    returns the report's data. ``workers`` > 1 runs the search in that many spawned processes
    of ``threads`` threads on the study, each running ``worker(config_dict, space, output,
    its_settings, threads, this_process_id)`` (the command line's: a process's settings are
    its own), instead of in this one."""
    output = Path(output)
    refuse_overlap(output, config.input_paths(), "tune's output")
    judged = verdict_config(config, list(settings.verdict_set), space)  # refused before trials
    output.mkdir(parents=True, exist_ok=True)
    metric = task_of(config.kind).metric_for(config)
    # Processes starting together make one study; the second reuses the first's runs.
    with output_lock(output, "a tune study", wait=True, lock="study"):
        study = open_study(output, settings, config, space, metric)
        start_from_config(study, config, space)
    log = Log(output / LOG, say)
    if workers > 1:
        if worker is None:
            raise ConfigError("tune: worker processes run the command line's search_worker")
        parent, data = os.getpid(), config.to_dict()
        run_workers(
            worker,
            lambda i: (data, space, output, worker_settings(output, settings, i), threads, parent),
            workers,
            log.say,
        )
    else:
        Search(study, config, space, output, settings, metric, log).run()
    if not report:
        return {}
    verdict = None
    with output_lock(output, "a tune verdict", wait=True, lock="verdict"):
        if settings.seeds and not unfinished(study):
            verdict = judge_best(
                study,
                judged,
                space,
                output,
                settings.seeds,
                settings.run_options(),
                metric,
                log.say,
            )
    rows = trial_rows(study)
    best = best_config(study, judged, space)
    if best is not None:
        text = yaml.safe_dump(best.to_dict(), sort_keys=False, allow_unicode=True)
        atomic_write(output / "best.yaml", lambda tmp: Path(tmp).write_text(text))
    summary = write_report(output, config, space, metric, settings, rows, verdict)
    if best is None:  # every trial failed: there is no best config to name
        raise BistackError(
            f"no trial completed, so there is no best config; {output}/{LOG} and each trial's "
            f"log under {output} say why (report in {output}/tune.{{md,json}})"
        )
    log.say(
        f"report in {output}/tune.{{md,json}}, charts tune-*.png; best config {output}/best.yaml"
    )
    return summary


def open_study(
    output: Path,
    settings: TuneSettings,
    config: ExperimentConfig,
    space: list[Parameter],
    metric: Metric,
) -> Any:
    """The study in ``settings.storage`` (created, or loaded to go on), refused when it was
    started with another config, space or metric."""
    try:
        import optuna
    except ImportError as error:
        raise ConfigError(needs_extra("tune", "tune", error)) from None
    url = storage_url(output, settings.storage)
    engine = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
    try:
        storage = optuna.storages.RDBStorage(url, engine_kwargs=engine)
    except Exception as error:  # SQLAlchemy's or a missing driver's: the URL is the cause
        raise ConfigError(f"--storage {url}: {str(error).splitlines()[0]}") from None
    sampler = tpe_sampler(settings, 0)
    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=settings.startup)
        if settings.prune
        else optuna.pruners.NopPruner()
    )
    study = optuna.create_study(
        storage=storage,
        study_name=settings.study_name,
        direction="maximize" if metric.higher_is_better else "minimize",
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )
    current_config = config.to_dict()
    recorded = {
        "config": current_config,
        "space": [p.to_dict() for p in space],
        "metric": metric.name,
    }
    if study.trials and settings.sampler_seed is not None:
        # A seeded sampler starts its draws over in each process: going on from the trials
        # already run, it would propose their values again.
        study.sampler = tpe_sampler(settings, len(study.trials))
    previous = study.user_attrs
    if not previous:
        for key, value in recorded.items():
            study.set_user_attr(key, value)
        return study
    changed = [key for key, value in recorded.items() if previous.get(key) != value]
    if changed:
        keys = differences(previous.get("config") or {}, current_config)
        named = f" (changed: {', '.join(keys)})" if keys else ""
        raise ConfigError(
            f"{url}: study {settings.study_name!r} was searched with another "
            f"{' and '.join(changed)}{named}; give the same ones to go on, or another --output "
            "(or --study-name) for a new search"
        )
    return study


def tpe_sampler(settings: TuneSettings, done: int) -> Any:
    """TPE for a study with ``done`` trials: seeded (``sampler_seed``) by how far it has come,
    so a resumed search draws on where it stopped, as repeatably as the first run."""
    import optuna

    seed = None if settings.sampler_seed is None else settings.sampler_seed + done
    return optuna.samplers.TPESampler(
        n_startup_trials=settings.startup, seed=seed, constant_liar=True
    )


class Log:
    """One line per trial (and the search's own lines), on the terminal and in ``tune.log``."""

    def __init__(self, path: Path, say: Callable[[str], None]) -> None:
        self.path, self.say_on_terminal = path, say

    def say(self, line: str) -> None:
        self.say_on_terminal(line)
        with self.path.open("a", encoding="utf-8") as handle:  # appends are whole lines
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [{os.getpid()}] {line}\n")


class Search:
    """The trials of one process: ask the study, train, tell, until enough trials count."""

    def __init__(
        self,
        study: Any,
        config: ExperimentConfig,
        space: list[Parameter],
        output: Path,
        settings: TuneSettings,
        metric: Metric,
        log: Log,
    ) -> None:
        self.study, self.config, self.space, self.output = study, config, space, output
        self.settings, self.metric, self.log = settings, metric, log

    def run(self) -> None:
        import optuna

        while True:
            reclaim_interrupted(self.study, self.log.say)
            if counted(self.study.get_trials(deepcopy=False)) >= self.settings.trials:
                return
            trial = self.study.ask()
            earlier = [t for t in self.study.get_trials(deepcopy=False) if t.number < trial.number]
            if counted(earlier) >= self.settings.trials:  # another process took the last one
                trial.set_user_attr("surplus", True)
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                return
            self.run_trial(trial)

    def run_trial(self, trial: Any) -> None:
        import optuna

        values = {p.key: p.suggest(trial) for p in self.space}
        directory = self.output / "trials" / f"trial-{trial.number:04d}"
        trial.set_user_attr("worker", worker_id())
        trial.set_user_attr("directory", str(directory.relative_to(self.output)))
        shown = ", ".join(f"{k}={format_value(v)}" for k, v in values.items())
        self.log.say(f"trial {trial.number} started: {shown}")
        pruned: list[str] = []
        started = time.monotonic()

        def on_epoch(epoch: int, score: float) -> str | None:
            value = self.metric.value(score)
            if not math.isfinite(value):
                return None
            trial.report(value, epoch)
            if self.settings.prune and trial.should_prune():
                pruned.append(f"epoch {epoch}")
                return (
                    f"pruned by the tuner: {self.metric.name} {value:.4g} at epoch {epoch} "
                    "is worse than the median of earlier trials there"
                )
            return None

        with heartbeat(trial):
            try:
                settings = with_value(self.config, values, f"trial {trial.number}")
                with trial_output(directory.with_suffix(".log")):
                    trained = train(
                        settings, directory, self.settings.run_options(), on_epoch=on_epoch
                    )
            except KeyboardInterrupt:
                trial.set_user_attr("interrupted", True)
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                self.study.enqueue_trial(values, user_attrs={"retry_of": trial.number})
                self.log.say(
                    f"trial {trial.number} interrupted: recorded as such; the same command "
                    "goes on from here, trying its values again"
                )
                raise
            except Exception as error:  # a trial is where one failure stops: the search goes on
                reason = (
                    f"{type(error).__name__}: {error}"
                    if not isinstance(error, BistackError)
                    else str(error)
                )
                with directory.with_suffix(".log").open("a", encoding="utf-8") as handle:
                    traceback.print_exc(file=handle)
                trial.set_user_attr("error", reason)
                trial.set_user_attr("seconds", round(time.monotonic() - started, 1))
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                self.say_done(trial.number, f"failed: {reason}")
                return
        best = self.metric.value(trained.fit.best_score)
        trial.set_user_attr("epochs", trained.fit.epochs)
        trial.set_user_attr("best_epoch", trained.fit.best_epoch)
        trial.set_user_attr("best", best)
        trial.set_user_attr("seconds", round(time.monotonic() - started, 1))
        if pruned:
            trial.set_user_attr("pruned_at", pruned[0])
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            self.say_done(trial.number, f"pruned at {pruned[0]} ({self.metric.name} {best:.4g})")
        else:
            self.study.tell(trial, best)
            self.say_done(trial.number, f"{self.metric.name} {best:.4g}")

    def say_done(self, number: int, outcome: str) -> None:
        trials = self.study.get_trials(deepcopy=False)
        done = counted([t for t in trials if t.state.name != "RUNNING"])
        line = f"trial {number} ({done} of {self.settings.trials} done): {outcome}"
        complete = [t for t in trials if t.state.name == "COMPLETE"]
        if complete:
            pick = max if self.metric.higher_is_better else min
            best = pick(complete, key=lambda t: t.value)
            line += f"; best so far {self.metric.name} {best.value:.4g} (trial {best.number})"
        self.log.say(line)


def start_from_config(study: Any, config: ExperimentConfig, space: list[Parameter]) -> None:
    """Enqueue the starting config's values as the first trial of a new study, when they lie
    in the space."""
    if study.get_trials(deepcopy=False):
        return
    values = start_values(config, space)
    if values is not None:
        study.enqueue_trial(values, user_attrs={"start": True})


def counted(trials: list[Any]) -> int:
    """How many of ``trials`` count toward the budget: those that ran to an end (complete,
    pruned, or failed with an error) and those running; not interrupted or surplus ones, nor
    ones waiting to start."""
    total = 0
    for trial in trials:
        state = trial.state.name
        if trial.user_attrs.get("surplus"):
            continue
        if state in ("COMPLETE", "PRUNED", "RUNNING") or (
            state == "FAIL" and "error" in trial.user_attrs
        ):
            total += 1
    return total


def unfinished(study: Any) -> bool:
    """Whether trials are still running or waiting (in another process, say)."""
    return any(t.state.name in ("RUNNING", "WAITING") for t in study.get_trials(deepcopy=False))


def start_values(config: ExperimentConfig, space: list[Parameter]) -> dict[str, Any] | None:
    """The starting config's value of every searched key, when each lies in the space."""
    data = config.to_dict()
    values = {}
    for parameter in space:
        node: Any = data
        for name in parameter.key.split("."):
            node = node.get(name) if isinstance(node, dict) else None
        if not parameter.contains(node):
            return None
        values[parameter.key] = node
    return values
