"""``bistack ladder``: the first seed's build order, one change at a time, every gain attributed.

Rungs (each trained with several seeds): 1. unidirectional, one layer (last-state pooling, or a
softmax head for tagging); 2. bidirectional; 3. + additive attention pooling, or + CRF; 4. + a
second layer; 5. + residual connections, three layers.

A rung "earns its place" when its gain over the previous rung is larger than twice the standard
error of that difference estimated from the seed-to-seed spread of both rungs
(``2 * sqrt(s_prev^2 / n + s_this^2 / n)``, about a 95% two-sided z-test); with one seed the
noise is unknown and the table says so. Finished runs are reused, so an interrupted ladder
resumes where it stopped.
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bistack.config import (
    AnyConfig,
    TaggerConfig,
    TextModelConfig,
    config_from_dict,
)
from bistack.errors import ConfigError
from bistack.modeldir import atomic_write, write_json
from bistack.recipes.repeated import RepeatedResult, run_or_reuse


@dataclass(frozen=True)
class Rung:
    name: str
    overrides: dict[str, Any]  # "section.key" -> value, applied on top of the base config


def rungs_for(config: AnyConfig) -> list[Rung]:
    """The five rungs for a tagging or a text config."""
    tagging = isinstance(config, TaggerConfig)
    base = {"encoder.bidirectional": False, "encoder.num_layers": 1, "encoder.residual": False}
    base |= {"head.type": "softmax"} if tagging else {"pooling.type": "last"}
    third = {"head.type": "crf"} if tagging else {"pooling.type": "additive"}
    rungs = [
        Rung("1. unidirectional, 1 layer", base),
        Rung("2. bidirectional", {"encoder.bidirectional": True}),
        Rung("3. + CRF" if tagging else "3. + attention pooling", third),
        Rung("4. + second layer", {"encoder.num_layers": 2}),
        Rung("5. + residual, 3 layers", {"encoder.num_layers": 3, "encoder.residual": True}),
    ]
    merged: dict[str, Any] = {}
    cumulative = []
    for rung in rungs:  # each rung keeps every change before it
        merged = merged | rung.overrides
        cumulative.append(Rung(rung.name, dict(merged)))
    return cumulative


def apply(config: AnyConfig, overrides: dict[str, Any], seed: int) -> AnyConfig:
    data = config.to_dict()
    for key, value in overrides.items():
        section, name = key.split(".")
        data[section][name] = value
    data["train"]["seed"] = seed
    return config_from_dict(data, source="ladder")


def metric_of(config: AnyConfig) -> tuple[str, str, bool]:
    """(metrics.csv column, display name, higher is better)."""
    if isinstance(config, TaggerConfig):
        return "dev_f1", "dev F1", True
    if isinstance(config, TextModelConfig) and config.task == "classification":
        return "dev_accuracy", "dev accuracy", True
    if isinstance(config, TextModelConfig):
        return "dev_rmse", "dev RMSE", False
    raise ConfigError("the ladder takes a recurrent tagging, classification or regression config")


def run_ladder(
    config: AnyConfig,
    output: str | Path,
    *,
    seeds: int = 3,
    progress: bool = False,
    say: Callable[[str], None] = print,
) -> list[RepeatedResult]:
    """Train every rung with ``seeds`` seeds (reusing finished runs); write the table."""
    column, metric, higher = metric_of(config)
    output = Path(output)
    results = []
    for index, rung in enumerate(rungs_for(config)):
        scores, seconds, parameters = [], [], 0
        for seed in range(1, seeds + 1):
            settings = apply(config, rung.overrides, seed)
            directory = output / f"rung{index + 1}" / f"seed{seed}"
            record = _train_or_reuse(settings, directory, column, higher, progress)
            scores.append(record["score"])
            seconds.append(record["seconds"])
            parameters = record["parameters"]
            score, wall = record["score"], record["seconds"]
            say(f"{rung.name} seed {seed}: {metric} {score:.4g} ({wall:.0f}s)")
        results.append(RepeatedResult(rung.name, scores, parameters, statistics.fmean(seconds)))
    write_ladder(output, results, metric, higher, seeds)
    say(format_ladder(results, metric, higher))
    return results


def _train_or_reuse(
    config: AnyConfig, directory: Path, column: str, higher: bool, progress: bool
) -> dict[str, Any]:
    from bistack.recipes.train_tagger import train_tagger
    from bistack.recipes.train_text import train_text_model

    def run() -> dict[str, Any]:
        started = time.monotonic()
        if isinstance(config, TaggerConfig):
            model_dir = train_tagger(config, directory, progress=progress)
        else:
            assert isinstance(config, TextModelConfig)
            model_dir = train_text_model(config, directory, progress=progress)
        seconds = time.monotonic() - started
        with (directory / "metrics.csv").open() as handle:
            values = [float(row[column]) for row in csv.DictReader(handle)]
        return {
            "score": max(values) if higher else min(values),
            "seconds": seconds,
            "parameters": _parameters(model_dir),
        }

    return run_or_reuse(directory, config, run)


def _parameters(model_dir: Path) -> int:
    """Trained parameters in a saved model (the CRF's constraint masks are buffers, not counted)."""
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as weights:
        return sum(
            math.prod(weights.get_slice(key).get_shape())
            for key in weights.keys()  # noqa: SIM118 - safe_open is not a mapping
            if not key.endswith("_ok")
        )


def judge(previous: RepeatedResult, current: RepeatedResult, higher: bool) -> tuple[float, str]:
    """(gain, verdict): the gain in the metric's good direction, and whether it beats noise."""
    gain = (current.mean - previous.mean) * (1 if higher else -1)
    n = len(current.scores)
    if n < 2:
        return gain, "unknown (1 seed: no noise estimate)"
    noise = 2 * math.sqrt(previous.std**2 / n + current.std**2 / n)
    if gain > noise:
        return gain, f"yes (gain > {noise:.3g})"
    return gain, f"no (gain <= {noise:.3g})"


def format_ladder(results: Sequence[RepeatedResult], metric: str, higher: bool) -> str:
    lines = [
        f"| rung | {metric} mean ± std | change | earns its place | parameters | s/run |",
        "|---|---|---|---|---|---|",
    ]
    for index, result in enumerate(results):
        if index == 0:
            change, verdict = "", "(baseline)"
        else:
            _, verdict = judge(results[index - 1], result, higher)
            change = f"{result.mean - results[index - 1].mean:+.3f}"
        lines.append(
            f"| {result.name} | {result.mean:.3f} ± {result.std:.3f} | {change} | {verdict} | "
            f"{result.parameters:,} | {result.seconds:.0f} |"
        )
    return "\n".join(lines)


def write_ladder(
    output: Path, results: Sequence[RepeatedResult], metric: str, higher: bool, seeds: int
) -> None:
    """ladder.md, ladder.json and ladder.png under ``output``."""
    rule = (
        "A rung earns its place when its gain over the previous rung exceeds "
        "2·sqrt(s_prev²/n + s_this²/n), the seed-to-seed noise of the difference (n seeds)."
    )
    table = format_ladder(results, metric, higher)
    markdown = f"# Build-order ladder ({metric}, {seeds} seeds)\n\n{table}\n\n{rule}\n"
    atomic_write(output / "ladder.md", lambda tmp: Path(tmp).write_text(markdown))
    rows = []
    for index, result in enumerate(results):
        row = asdict(result) | {"mean": result.mean, "std": result.std}
        if index:
            gain, verdict = judge(results[index - 1], result, higher)
            row |= {"gain": gain, "earns_its_place": verdict}
        rows.append(row)
    summary = {"metric": metric, "seeds": seeds, "rule": rule, "rungs": rows}
    write_json(output / "ladder.json", summary)
    _chart(output / "ladder.png", results, metric)


def _chart(path: Path, results: Sequence[RepeatedResult], metric: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4))
    axes.errorbar(
        range(len(results)),
        [r.mean for r in results],
        yerr=[r.std for r in results],
        marker="o",
        capsize=4,
    )
    axes.set_xticks(range(len(results)), [r.name for r in results], rotation=20, ha="right")
    axes.set_ylabel(metric)
    axes.set_title("Build-order ladder: mean ± std over seeds")
    figure.tight_layout()
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=120))
    plt.close(figure)
