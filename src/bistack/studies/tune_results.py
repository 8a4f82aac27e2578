"""What ``bistack tune`` leaves to read: ``tune.md`` (the verdict and every trial), ``tune.json``
(the same as data), ``tune-history.png`` (each trial's dev metric and the best so far) and
``tune-params.png`` (each searched key's values against the dev metric)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.config import ExperimentConfig
from bistack.errors import BistackError, needs_extra
from bistack.files.modeldir import atomic_write, write_json
from bistack.metrics.dev import Metric
from bistack.studies.repeated import RepeatedResult
from bistack.studies.search_space import Parameter
from bistack.studies.seed_table import Comparison, format_table

RULE = (
    "The tuned config wins when its gain over the starting config exceeds "
    "2·sqrt(s_start²/n + s_best²/n), the seed-to-seed noise of the difference (n seeds), as "
    "the ladder judges a rung."
)


@dataclass(frozen=True)
class TrialRow:
    """One trial as the report shows it. state: complete, pruned, failed, interrupted, running
    or waiting; value: its best dev metric (a pruned trial's best before it stopped)."""

    number: int
    state: str
    value: float | None
    params: dict[str, Any]
    epochs: int | None
    seconds: float | None
    note: str
    error: str
    directory: str


@dataclass(frozen=True)
class Verdict:
    """The best trial against the starting config over new seeds (None: not retrained, as when
    the best trial is the starting config), the gain in the metric's good direction, and
    whether it beats the seed noise."""

    trial: int
    start: RepeatedResult | None
    best: RepeatedResult | None
    gain: float
    says: str


def write_report(
    output: Path,
    config: ExperimentConfig,
    space: list[Parameter],
    metric: Metric,
    settings: Any,
    rows: list[TrialRow],
    verdict: Verdict | None,
) -> dict[str, Any]:
    """tune.md, tune.json and the two charts in ``output``; returns tune.json's data."""
    summary = {
        "kind": config.kind,
        "metric": metric.name,
        "higher_is_better": metric.higher_is_better,
        "trials_asked": settings.trials,
        "seeds": settings.seeds,
        "verdict_set": list(settings.verdict_set),
        "space": [p.to_dict() for p in space],
        "counts": {state: sum(r.state == state for r in rows) for state in _STATES},
        "verdict": _verdict_data(verdict),
        "rule": RULE,
        "trials": [dataclasses.asdict(row) for row in rows],
    }
    write_json(output / "tune.json", summary)
    markdown = _markdown(config, space, metric, settings, rows, verdict)
    atomic_write(output / "tune.md", lambda tmp: Path(tmp).write_text(markdown, encoding="utf-8"))
    _charts(output, space, metric, rows)
    return summary


_STATES = ("complete", "pruned", "failed", "interrupted", "running", "waiting")


def _verdict_data(verdict: Verdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    data: dict[str, Any] = {"best_trial": verdict.trial, "gain": verdict.gain, "says": verdict.says}
    for name, result in (("start", verdict.start), ("best", verdict.best)):
        if result is not None:
            data[name] = dataclasses.asdict(result) | {"mean": result.mean, "std": result.std}
    return data


def _markdown(
    config: ExperimentConfig,
    space: list[Parameter],
    metric: Metric,
    settings: Any,
    rows: list[TrialRow],
    verdict: Verdict | None,
) -> str:
    direction = "higher" if metric.higher_is_better else "lower"
    counts = ", ".join(
        f"{n} {state}" for state in _STATES if (n := sum(r.state == state for r in rows))
    )
    lines = [
        f"# Tuning a {config.kind} ({metric.name}, {direction} is better)",
        "",
        f"{len(rows)} trials ({counts or 'none yet'}) of {settings.trials} asked for, over:",
        "",
        *(f"- {p.describe()}" for p in space),
        "",
        "## Verdict",
        "",
    ]
    if verdict is None:
        lines.append(
            "Not judged: "
            + (
                "no trial completed."
                if not any(r.state == "complete" for r in rows)
                else "no retraining asked for (--seeds 0), or trials still running elsewhere."
            )
        )
    elif verdict.start is None or verdict.best is None:
        lines.append(
            f"Trial {verdict.trial} is the best, and it is the starting config: no change to judge."
        )
    else:
        comparison = Comparison(
            title="",
            row_label="config",
            metric=metric.name,
            higher_is_better=metric.higher_is_better,
            digits=4,
            rows_key="configs",
            gains=True,
        )
        lines += [
            format_table(comparison, [verdict.start, verdict.best]),
            "",
            f"**Does the tuned config beat the starting one beyond the seed noise? "
            f"{verdict.says}** (gain {verdict.gain:+.4g}). {RULE} Both were retrained "
            "with new seeds: the search picked the best of many single runs on dev, so its own "
            "score carries the luck of its seed; these do not. The config is in best.yaml.",
        ]
        if settings.verdict_set:
            given = ", ".join(f"`{o}`" for o in settings.verdict_set)
            lines += ["", f"The verdict's runs (not the trials) had {given}; so has best.yaml."]
    lines += ["", "## Trials", "", *_trial_table(space, metric, rows), ""]
    failed = [r for r in rows if r.error]
    if failed:
        lines += ["## Errors", "", *(f"- trial {r.number}: {r.error}" for r in failed), ""]
    return "\n".join(lines)


def _trial_table(space: list[Parameter], metric: Metric, rows: list[TrialRow]) -> list[str]:
    keys = [p.key for p in space]
    lines = [
        f"| trial | state | {metric.name} | {' | '.join(keys)} | epochs | seconds | note |",
        "|---|---|---|" + "---|" * len(keys) + "---|---|---|",
    ]
    for row in rows:
        value = f"{row.value:.4g}" if row.value is not None else ""
        params = " | ".join(_shown(row.params.get(key)) for key in keys)
        seconds = f"{row.seconds:.0f}" if row.seconds is not None else ""
        lines.append(
            f"| {row.number} | {row.state} | {value} | {params} | {row.epochs or ''} | "
            f"{seconds} | {row.note} |"
        )
    return lines


def _shown(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _charts(output: Path, space: list[Parameter], metric: Metric, rows: list[TrialRow]) -> None:
    """tune-history.png and tune-params.png, drawn on Figures of their own (no pyplot)."""
    try:
        import matplotlib  # noqa: F401 - the package itself, checked before anything is drawn
        from matplotlib.figure import Figure
    except ImportError as error:
        raise BistackError(
            f"{output}: "
            + needs_extra("drawing the charts", "plots", error)
            + "; tune.md and tune.json are written"
        ) from None
    scored = [(r, r.value) for r in rows if r.value is not None and math.isfinite(r.value)]
    figure = Figure(figsize=(7, 4))
    axes = figure.subplots()
    for state, marker in (("complete", "o"), ("pruned", "x")):
        shown = [(r.number, value) for r, value in scored if r.state == state]
        axes.scatter([n for n, _ in shown], [v for _, v in shown], marker=marker, label=state)
    best_so_far: list[tuple[int, float]] = []
    best: float | None = None
    pick = max if metric.higher_is_better else min
    completed = sorted((p for p in scored if p[0].state == "complete"), key=lambda p: p[0].number)
    for row, value in completed:
        best = value if best is None else pick(best, value)
        best_so_far.append((row.number, best))
    if best_so_far:
        axes.step(*zip(*best_so_far, strict=True), where="post", label="best so far")
    axes.set_xlabel("trial")
    axes.set_ylabel(f"{metric.name} ({'higher' if metric.higher_is_better else 'lower'} is better)")
    axes.set_title("Optimisation history")
    axes.legend(fontsize=8)
    figure.tight_layout()
    atomic_write(
        output / "tune-history.png", lambda tmp: figure.savefig(tmp, format="png", dpi=110)
    )

    columns = min(3, len(space))
    lines = math.ceil(len(space) / columns)
    figure = Figure(figsize=(4 * columns, 3.2 * lines))
    grid = figure.subplots(lines, columns, squeeze=False)
    for index, parameter in enumerate(space):
        axes = grid[index // columns][index % columns]
        for state, marker in (("complete", "o"), ("pruned", "x")):
            tried = [(r, v) for r, v in scored if r.state == state and parameter.key in r.params]
            if parameter.kind == "choice":
                positions = {repr(c): i for i, c in enumerate(parameter.choices)}
                xs = [positions[repr(r.params[parameter.key])] for r, _ in tried]
                axes.set_xticks(range(len(parameter.choices)), [str(c) for c in parameter.choices])
            else:
                xs = [r.params[parameter.key] for r, _ in tried]
                if parameter.log:
                    axes.set_xscale("log")
            axes.scatter(xs, [v for _, v in tried], marker=marker, label=state)
        axes.set_xlabel(parameter.key)
        axes.set_ylabel(metric.name)
    for index in range(len(space), lines * columns):
        grid[index // columns][index % columns].set_visible(False)
    figure.suptitle(
        "Each searched key against the dev metric (x: pruned, best before it stopped)", fontsize=9
    )
    figure.tight_layout()
    atomic_write(output / "tune-params.png", lambda tmp: figure.savefig(tmp, format="png", dpi=110))
