"""One fold of a cross-validation: the job a worker takes, its training, and its record.

A fold's model trains on the other folds' rows, is opened through the door, and predicts the
rows it never saw; its record (``fold.json``, written last) says which rows, its score and
its model's digest, so that a killed CV goes on from its first unfinished fold and a model
changed since is noticed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bistack.config import ExperimentConfig
from bistack.cv.family import Family, family_of, opener_of
from bistack.cv.folder import FOLD_FILE, MODEL_DIR
from bistack.errors import ConfigError
from bistack.files.fingerprints import content_digest
from bistack.files.modeldir import write_json
from bistack.folds.contract import FoldResult, Predictions, Say
from bistack.runs.driver import RunOptions
from bistack.runs.rundir import refuse_if_in_use
from bistack.tasks import config_from_dict, task_of


@dataclass(frozen=True)
class FoldJob:
    """One fold's run, as plain data a worker process takes."""

    config: dict[str, Any]  # as the config's to_dict() gives it: a worker builds it again
    directory: str
    name: str
    train: list[int]
    dev: list[int]  # the rows that choose the epoch: the held-out fold, or an inner dev split
    held: list[int]
    dev_source: str
    options: RunOptions
    calibrate_on_dev: bool  # false where dev is the held-out fold: nothing is fitted on it
    seed: int | None = None  # its training seed where not the config's (a dev split's repeat)

    def labelled(self) -> FoldJob:
        """This job with each of its lines starting with its name (``fold1: epoch 3: ...``)."""
        return replace(self, options=replace(self.options, label=self.name))

    def on_device(self, index: int) -> FoldJob:
        """This job trained on GPU ``index`` (Fabric's ``"N,"``: that device, not N of them)."""
        return replace(self, options=replace(self.options, devices=f"{index},"))


@dataclass(frozen=True)
class FoldInputs:
    """What training a fold needs besides its rows, made once for the folds one process
    trains in a row: the config, its family (rows read) and what every fold shares."""

    config: ExperimentConfig
    family: Family
    shared: object

    @classmethod
    def of(cls, config: dict[str, Any], say: Say, family: Family | None = None) -> FoldInputs:
        """Those of ``config``; ``family``: one already built from it."""
        built = config_from_dict(config)
        chosen = family if family is not None else family_of(built)
        return cls(built, chosen, chosen.shared_inputs(say))


def finished_fold(job: FoldJob, family: Family) -> FoldResult[Predictions] | None:
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
    return FoldResult.from_json(record, family.read_predictions, str(written))


def train_fold(
    job: FoldJob, say: Say | None = None, inputs: FoldInputs | None = None
) -> FoldResult[Predictions]:
    """Train one fold and predict its held-out rows; its record, also written to
    ``fold.json`` (last, so that only a finished fold has one)."""
    from bistack.training import train_config

    made = inputs or FoldInputs.of(job.config, say or (lambda _: None))
    config, family, shared = made.config, made.family, made.shared
    if job.seed is not None:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, seed=job.seed))
    card = task_of(config.kind)
    started = time.perf_counter()
    rows = family.training_inputs(job.train, job.dev, job.dev_source, shared, job.calibrate_on_dev)
    refuse_if_in_use(Path(job.directory), f"name another fold than {job.name} in --runs")
    trained = train_config(config, job.directory, job.options, None, **rows)
    model = opener_of(card)(Path(trained.model_dir), family.model_parts(shared))
    metric = card.metric_for(config).column.removeprefix("dev_")
    held_out = family.predict_held_out(model, job.held, shared, metric, Path(job.directory))
    record: FoldResult[Predictions] = FoldResult(
        job.name,
        job.train,
        job.held,
        held_out,
        trained.fit.best_epoch,
        trained.fit.best_step,
        trained.parameters,
        time.perf_counter() - started,  # training and the held-out pass
        content_digest(trained.model_dir),
    )
    write_json(Path(job.directory) / FOLD_FILE, record.to_json())
    return record


def train_fold_alone(job: FoldJob, threads: int) -> FoldResult[Predictions]:
    """:func:`train_fold` in a process of its own (a Ray worker) with ``threads`` threads."""
    import torch

    torch.set_num_threads(threads)
    return train_fold(job)
