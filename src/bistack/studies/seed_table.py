"""The table, JSON and chart of repeated runs (the ladder's rungs, compare-poolers' poolers):
one row per setting, its mean ± std over seeds or folds, optionally the gain over the row
before and whether that gain beats the seed noise."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bistack.errors import BistackError, needs_extra
from bistack.files.modeldir import atomic_write, write_json
from bistack.studies.repeated import RepeatedResult

NOISE_RULE = (
    "A rung earns its place when its gain over the previous rung exceeds "
    "2·sqrt(s_prev²/n + s_this²/n), the seed-to-seed noise of the difference (n seeds)."
)


@dataclass(frozen=True)
class Comparison:
    """How to show a set of repeated results.

    row_label: what a row is ("rung", "pooler"); metric: the score's name; digits: decimals
    shown; gains: add the change over the previous row and its verdict (the ladder);
    rows_key: the JSON key of the rows; fields: further JSON fields (where, seeds, rule).
    """

    title: str
    row_label: str
    metric: str
    higher_is_better: bool
    digits: int
    rows_key: str
    gains: bool = False
    notes: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


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


def format_table(comparison: Comparison, results: Sequence[RepeatedResult]) -> str:
    digits = comparison.digits
    gains = "change | earns its place | " if comparison.gains else ""
    lines = [
        f"| {comparison.row_label} | {comparison.metric} mean ± std | runs | {gains}"
        "parameters | training s/run |",
        "|---|---|---|" + ("---|---|" if comparison.gains else "") + "---|---|",
    ]
    for index, r in enumerate(results):
        values = " ".join(f"{s:.{digits}f}" for s in r.scores)
        if r.runs:  # a partial table: which fold or seed each score is
            values = " ".join(
                f"{run} {s:.{digits}f}" for run, s in zip(r.runs, r.scores, strict=True)
            )
        change = ""
        if comparison.gains:
            if index == 0:
                change = " | (baseline) | "
            else:
                _, verdict = judge(results[index - 1], r, comparison.higher_is_better)
                change = f"{r.mean - results[index - 1].mean:+.{digits}f} | {verdict} | "
        lines.append(
            f"| {r.name} | {r.mean:.{digits}f} ± {r.std:.{digits}f} | {values} | {change}"
            f"{r.parameters:,} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def write_comparison(
    output: Path, stem: str, comparison: Comparison, results: Sequence[RepeatedResult]
) -> None:
    """``stem.md``, ``stem.json`` and ``stem.png`` under ``output``."""
    table = format_table(comparison, results)
    notes = f"\n{comparison.notes}\n" if comparison.notes else ""
    markdown = f"# {comparison.title}\n\n{table}\n{notes}"
    atomic_write(output / f"{stem}.md", lambda tmp: Path(tmp).write_text(markdown))
    rows = []
    for index, result in enumerate(results):
        row = dataclasses.asdict(result) | {"mean": result.mean, "std": result.std}
        if comparison.gains and index:
            gain, verdict = judge(results[index - 1], result, comparison.higher_is_better)
            row |= {"gain": gain, "earns_its_place": verdict}
        rows.append(row)
    summary = {"metric": comparison.metric, **comparison.fields, comparison.rows_key: rows}
    write_json(output / f"{stem}.json", summary)
    chart(output / f"{stem}.png", comparison, results)


def chart(path: Path, comparison: Comparison, results: Sequence[RepeatedResult]) -> None:
    """Bars of the means with the seed or fold spread as error bars, zoomed to the range."""
    try:
        import matplotlib  # noqa: F401 - the package itself, checked before anything is drawn
        from matplotlib.figure import Figure  # a Figure of its own: no pyplot, no backend chosen
    except ImportError as error:  # the table and its JSON are written; only the picture needs it
        raise BistackError(
            f"{path}: not drawn: " + needs_extra("the chart", "plots", error) + "; the table and "
            "the JSON beside it are written"
        ) from None

    figure = Figure(figsize=(1.2 * len(results) + 2, 4))
    axes = figure.subplots()
    names = [r.name for r in results]
    axes.bar(names, [r.mean for r in results], yerr=[r.std for r in results], capsize=4)
    low = min(r.mean - r.std for r in results)
    high = max(r.mean + r.std for r in results)
    pad = (high - low) * 0.5 or 0.05
    axes.set_ylim(low - pad, high + pad)
    direction = "higher" if comparison.higher_is_better else "lower"
    axes.set_ylabel(f"{comparison.metric} ({direction} is better)")
    axes.set_title(comparison.title, fontsize=8)
    axes.tick_params(axis="x", rotation=30)
    for label in axes.get_xticklabels():
        label.set_horizontalalignment("right")
    figure.tight_layout()
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=120))
