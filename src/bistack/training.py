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

from bistack.config import ExperimentConfig, TextDataConfig, read_yaml
from bistack.data.tables import tables_in_memory
from bistack.errors import ConfigError
from bistack.recipes.driver import RunOptions
from bistack.recipes.loop import FitResult


@dataclass(frozen=True)
class TrainingResult:
    """Where the trained model is, how training went (best epoch and score), its size."""

    model_dir: Path
    fit: FitResult
    parameters: int  # trained parameters (a frozen backbone's not counted)

    def load(self) -> Any:
        """The trained model, loaded as its kind's class (``Tagger``, ``Classifier``...)."""
        from bistack.tasks import load_model

        return load_model(self.model_dir)


def train(
    config: str | Path | dict[str, Any] | ExperimentConfig,
    output: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    train_data: Any = None,
    dev_data: Any = None,
    resume: bool = False,
    overwrite: bool = False,
    precision: str | None = None,
    devices: int | str = 1,
    progress: bool = False,
) -> TrainingResult:
    """Train a model and return where it is (``.model_dir``), how training went (``.fit``) and
    its size; ``.load()`` loads it.

    ``config``: a YAML file, a dict as the YAML would give, or a config object.
    ``output``: the run directory (default: ``runs/<config file name>``, or ``runs/model``).
    ``overrides``: ``{"train.max_epochs": 3, "optimizer.lr": 0.001}``, applied before checks.
    ``train_data`` / ``dev_data``: rows with the config's text and label columns, instead of
    ``data.train`` / ``data.dev`` files (classifiers and regressors); the config records them
    as ``memory:train`` / ``memory:dev``.
    ``resume``, ``overwrite``, ``precision``, ``devices``, ``progress``: as on the command line.
    """
    from bistack.tasks import config_from_dict
    from bistack.tasks import train as train_config

    if isinstance(config, ExperimentConfig):
        data, source = config.to_dict(), "config"
    elif isinstance(config, dict):
        data, source = copy.deepcopy(config), "config"
    else:
        data, source = read_yaml(config), str(config)
    for key, value in (overrides or {}).items():
        _set(data, key, value)
    tables = {
        name: rows for name, rows in (("train", train_data), ("dev", dev_data)) if rows is not None
    }
    if output is None:
        output = Path("runs") / (Path(config).stem if isinstance(config, str | Path) else "model")
    options = RunOptions(
        devices=devices,
        precision=precision,
        progress=progress,
        overwrite=overwrite,
        resume=resume,
    )
    with tables_in_memory(**tables) as sources:
        section = data.setdefault("data", {})
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: data must be a mapping")
        section.update(sources)
        built = config_from_dict(data, source)
        if tables and not isinstance(built.data, TextDataConfig):  # type: ignore[attr-defined]
            raise ConfigError(
                f"{source}: train_data and dev_data hand over tables of texts, for classifiers "
                f"and regressors; a {built.kind} reads its data.train file"
            )
        trained = train_config(built, output, options)
    return TrainingResult(trained.model_dir, trained.fit, trained.parameters)


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = data
    for parent in parents:
        node = node.setdefault(parent, {})
        if not isinstance(node, dict):
            raise ConfigError(f"overrides: {parent!r} in {key!r} is not a section")
    node[leaf] = value
