"""Training from Python: ``bistack.train(config_or_path, output=..., overrides={...})``.

The same run as ``bistack train`` (the one driver, its staging and checkpoints), with a config
given as a YAML path, a dict or a config object, overrides as a dict of dotted keys, and tables
handed over directly (a ``datasets.Dataset``, a pandas DataFrame or a list of dicts) for
classifiers and regressors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.config import ExperimentConfig
from bistack.config.files import set_key
from bistack.data.tables import memory_sources
from bistack.errors import ConfigError
from bistack.runs.driver import DEFAULT_OPTIONS, RunOptions, TrainedModel, train_model
from bistack.runs.loop import EpochHook


def checked_rows(rows: Any, name: str) -> Any:
    """``rows`` if they are a table ``bistack.train`` takes: a ``datasets.Dataset``, a pandas
    DataFrame, or a list (or other sequence) of dicts; a TypeError naming ``name`` otherwise."""
    if hasattr(rows, "column_names") or hasattr(rows, "columns"):  # Dataset, DataFrame
        return rows
    if isinstance(rows, str | bytes | dict) or not hasattr(rows, "__iter__"):
        raise TypeError(
            f"{name}: expected a datasets.Dataset, a pandas DataFrame or a list of dicts, not "
            f"{type(rows).__name__}"
        )
    rows = list(rows)
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TypeError(f"{name}: row {index} is {type(row).__name__}, not a dict of columns")
    return rows


def train_config(
    config: ExperimentConfig,
    output: str | Path,
    options: RunOptions = DEFAULT_OPTIONS,
    on_epoch: EpochHook | None = None,
    **inputs: Any,
) -> TrainedModel:
    """Train as ``config`` says, through the one driver, with its kind's recipe and dev metric
    (from the task table); the best model goes to ``output/model``. ``inputs`` go to the
    recipe (a loaded backbone shared by many runs; tables handed over from Python);
    ``on_epoch(epoch, score)`` may stop the run after an epoch (a tuner's pruning)."""
    from bistack.tasks import task_of

    card = task_of(config.kind)
    metric = card.metric_for(config)
    return train_model(
        config, output, card.prepare, metric, options, card.description, on_epoch, **inputs
    )


@dataclass(frozen=True)
class TrainingResult(TrainedModel):
    """Where the trained model is, how training went (best epoch and score), its size: the
    driver's :class:`~bistack.runs.driver.TrainedModel`, which a user can also load."""

    def load(self) -> Any:
        """The trained model, loaded as its kind's class (``Tagger``, ``Classifier``...)."""
        from bistack.predictor import load_model

        return load_model(self.model_dir)


def config_data(
    config: str | Path | dict[str, Any] | ExperimentConfig, overrides: dict[str, Any] | None
) -> tuple[dict[str, Any], str]:
    """A config given as a YAML path, a dict or a config object, as the dict its YAML would
    give, with ``overrides`` (dotted keys) applied; and where it came from, for messages."""
    from bistack.tasks import read_config_file

    if isinstance(config, ExperimentConfig):
        data, source = config.to_dict(), "config"
    elif isinstance(config, dict):
        data, source = copy.deepcopy(config), "config"
    elif isinstance(config, str | Path):
        data, source = read_config_file(config), str(config)
    else:
        raise TypeError(
            "config: expected a YAML file's path, a dict or a config object, not "
            f"{type(config).__name__}"
        )
    if overrides is not None and not isinstance(overrides, dict):
        raise TypeError(
            "overrides: expected a dict of dotted keys, e.g. {'train.max_epochs': 3}, not "
            f"{type(overrides).__name__}"
        )
    for key, value in (overrides or {}).items():
        if not isinstance(key, str) or not key:
            raise TypeError(
                f"overrides: a key must be a dotted string such as 'optimizer.lr', not {key!r}"
            )
        set_key(data, key, value, "overrides")
    if isinstance(config, str | Path):
        from bistack.tasks import refuse_missing_data

        refuse_missing_data(data, config)
    return data, source


def train(
    config: str | Path | dict[str, Any] | ExperimentConfig,
    output: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    train_data: Any = None,
    dev_data: Any = None,
    resume: bool = False,
    overwrite: bool = False,
    accelerator: str = "auto",
    devices: int | str = 1,
    precision: str | None = None,
    progress: bool = False,
) -> TrainingResult:
    """Train a model and return where it is (``.model_dir``), how training went (``.fit``) and
    its size; ``.load()`` loads it.

    ``config``: a YAML file, a dict as the YAML would give, or a config object.
    ``output``: the run directory (default: ``runs/<config file name>``, or ``runs/model``).
    ``overrides``: ``{"train.max_epochs": 3, "optimizer.lr": 0.001}``, applied before checks.
    ``train_data`` / ``dev_data``: rows with the config's text and label columns, instead of
    ``data.train`` / ``data.dev`` files (classifiers and regressors); the config records them
    as ``memory:train`` / ``memory:dev``, and the rows go to the run with it (nothing is kept
    beyond the call, so calls in one process, or in threads, never see each other's).
    ``accelerator`` (``auto``: a GPU when there is one, else the CPU; ``cpu``, ``cuda``...),
    ``devices``, ``precision`` (``bf16-mixed``, ``16-mixed``), ``resume``, ``overwrite``,
    ``progress``: as on the command line.
    """
    from bistack.tasks import config_from_dict, task_of

    data, source = config_data(config, overrides)
    tables = {
        name: checked_rows(rows, f"{name}_data")
        for name, rows in (("train", train_data), ("dev", dev_data))
        if rows is not None
    }
    if output is None:
        output = Path("runs") / (Path(config).stem if isinstance(config, str | Path) else "model")
    options = RunOptions(
        accelerator=accelerator,
        devices=devices,
        precision=precision,
        progress=progress,
        overwrite=overwrite,
        resume=resume,
    )
    sources, rows = memory_sources(**tables)
    section = data.setdefault("data", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: data must be a mapping")
    section.update(sources)
    built = config_from_dict(data, source)
    inputs: dict[str, Any] = {"tables": rows} if rows else {}
    if rows and not task_of(built.kind).takes_tables:
        raise ConfigError(
            f"{source}: train_data and dev_data hand over tables of texts, for classifiers "
            f"and regressors; a {built.kind} reads its data.train file"
        )
    trained = train_config(built, output, options, **inputs)
    return TrainingResult(trained.model_dir, trained.fit, trained.parameters)
