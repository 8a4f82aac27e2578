"""``bistack ladder``: the build order of bidirectional and stacked models, one change at a
time, every gain attributed.

Rungs (each trained with several seeds): 1. unidirectional, one layer (the kind's plainest head:
last-state pooling, or a softmax head for tagging); 2. bidirectional; 3. what the kind adds on
top (additive attention pooling, or a CRF); 4. + a second layer; 5. + residual connections,
three layers; and, when asked for (taggers), 6. + a transformer's word states stacked beside the
tagger's own features. The kind's first, third and sixth rungs come from the task table.

A rung "earns its place" when its gain over the previous rung is larger than twice the standard
error of that difference estimated from the seed-to-seed spread of both rungs
(``2 * sqrt(s_prev^2 / n + s_this^2 / n)``, about a 95% two-sided z-test); with one seed the
noise is unknown and the table says so. Finished runs are reused, so an interrupted ladder
resumes where it stopped.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bistack.cards import Card
from bistack.config import ExperimentConfig
from bistack.config.files import build_config
from bistack.errors import ConfigError
from bistack.files.paths import refuse_overlap
from bistack.runs.driver import RunOptions
from bistack.studies.repeated import RepeatedResult, run_or_reuse
from bistack.studies.seed_table import NOISE_RULE, Comparison, format_table, write_comparison
from bistack.tasks import TASKS, task_of
from bistack.training import train_config as train


@dataclass(frozen=True)
class Rung:
    name: str
    overrides: dict[str, Any]  # "section.key" -> value, applied on top of the base config
    transformer: str | None = None  # a backbone whose word states the rung stacks, if any


def rungs_for(config: ExperimentConfig, transformer: str | None = None) -> list[Rung]:
    """The rungs for the kind of ``config``, each keeping every change before it; with
    ``transformer`` (a backbone path, or "default"), a sixth that stacks its word states."""
    ladder = _task_with_ladder(config).ladder
    assert ladder is not None
    rungs = [
        Rung("1. unidirectional, 1 layer", dict(ladder.first)),
        Rung("2. bidirectional", {"encoder.bidirectional": True}),
        Rung(ladder.third_name, dict(ladder.third)),
        Rung("4. + second layer", {"encoder.num_layers": 2}),
        Rung("5. + residual, 3 layers", {"encoder.num_layers": 3, "encoder.residual": True}),
    ]
    if transformer is not None:
        if ladder.with_transformer is None:
            raise ConfigError(
                f"the ladder stacks transformer states only for taggers, not for "
                f"{task_of(config.kind).description}"
            )
        rungs.append(Rung("6. + transformer states", {}, transformer))
    merged: dict[str, Any] = {}
    cumulative = []
    for rung in rungs:
        merged = merged | rung.overrides
        cumulative.append(Rung(rung.name, dict(merged), rung.transformer))
    return cumulative


def _task_with_ladder(config: ExperimentConfig) -> Card:
    task = task_of(config.kind)
    if task.ladder is None:
        with_ladder = ", ".join(kind for kind, t in TASKS.items() if t.ladder is not None)
        raise ConfigError(
            f"the ladder takes a config of a kind with a build order ({with_ladder}), "
            f"not {task.description}"
        )
    return task


def apply(config: ExperimentConfig, rung: Rung, seed: int) -> ExperimentConfig:
    """``config`` with the rung's changes and ``seed``."""
    data = config.to_dict()
    for key, value in rung.overrides.items():
        section, name = key.split(".")
        data[section][name] = value
    data["train"]["seed"] = seed
    if rung.transformer is None:
        return build_config(type(config), data, source="ladder")
    ladder = task_of(config.kind).ladder
    assert ladder is not None and ladder.with_transformer is not None
    stacked = ladder.with_transformer(data, rung.transformer)
    return build_config(task_of(stacked["kind"]).config_class, stacked, source="ladder")


def run_ladder(
    config: ExperimentConfig,
    output: str | Path,
    *,
    seeds: int = 3,
    transformer: str | None = None,
    progress: bool = False,
    log_format: Literal["text", "json"] = "text",
    say: Callable[[str], None] = print,
) -> list[RepeatedResult]:
    """Train every rung with ``seeds`` seeds (reusing finished runs); write the table.
    ``transformer``: a backbone (path, or "default") for the "+ transformer states" rung."""
    metric = _task_with_ladder(config).metric_for(config)
    refuse_overlap(output, config.input_paths(), "the ladder's output")
    output = Path(output)
    results = []
    for index, rung in enumerate(rungs_for(config, transformer)):
        scores, seconds, parameters = [], [], 0
        for seed in range(1, seeds + 1):
            settings = apply(config, rung, seed)
            directory = output / f"rung{index + 1}" / f"seed{seed}"

            def run(settings: ExperimentConfig = settings, directory: Path = directory) -> dict:
                # A run without its result.json did not finish: its model may be replaced.
                options = RunOptions(
                    progress=progress, overwrite=True, log_format=log_format, checkpoints=False
                )
                trained = train(settings, directory, options)
                best = metric.value(trained.fit.best_score)
                return {"score": best, "parameters": trained.parameters}

            record = run_or_reuse(directory, settings, run)
            scores.append(record["score"])
            seconds.append(record["seconds"])
            parameters = record["parameters"]
            say(
                f"{rung.name} seed {seed}: {metric.name} {record['score']:.4g} "
                f"({record['seconds']:.0f}s)"
            )
        results.append(RepeatedResult(rung.name, scores, parameters, statistics.fmean(seconds)))
    comparison = Comparison(
        title=f"Build-order ladder ({metric.name}, {seeds} seeds)",
        row_label="rung",
        metric=metric.name,
        higher_is_better=metric.higher_is_better,
        digits=3,
        rows_key="rungs",
        gains=True,
        notes=NOISE_RULE,
        fields={"seeds": seeds, "rule": NOISE_RULE},
    )
    write_comparison(output, "ladder", comparison, results)
    say(format_table(comparison, results))
    return results
