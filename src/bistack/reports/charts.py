"""The report's charts, each from its plain-data spec (``type``: bars, matrix, reliability,
scatter), drawn with matplotlib on a Figure of its own (no pyplot, no backend chosen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bistack.errors import ConfigError, needs_extra


def draw(spec: dict[str, Any], path: Path) -> None:
    """Write ``spec`` as a PNG at ``path``."""
    try:
        import matplotlib  # noqa: F401 - the package itself, checked before anything is drawn
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ConfigError(needs_extra("drawing the report's charts", "plots", error)) from None
    figure = Figure(figsize=(7, 4.2), constrained_layout=True)
    axes = figure.subplots()
    DRAWERS[spec["type"]](axes, spec)
    axes.set_title(spec["title"], fontsize=9)
    figure.savefig(path, format="png", dpi=110)


def plain(text: Any) -> str:
    """A label as matplotlib should draw it: a ``$`` is a dollar sign, not math."""
    return str(text).replace("$", r"\$")


def bars(axes: Any, spec: dict[str, Any]) -> None:
    labels, series = spec["labels"], spec["series"]
    width = 0.8 / max(len(series), 1)
    for number, (name, values) in enumerate(series.items()):
        positions = [i + (number - (len(series) - 1) / 2) * width for i in range(len(labels))]
        axes.bar(positions, values, width, label=name)
    axes.set_xticks(range(len(labels)), [plain(label) for label in labels], rotation=30)
    axes.set_ylabel(spec.get("ylabel", ""))
    axes.legend(fontsize=8)


def matrix(axes: Any, spec: dict[str, Any]) -> None:
    values = spec["values"]
    image = axes.imshow(values, cmap="Blues")
    axes.set_xticks(range(len(spec["columns"])), [plain(c) for c in spec["columns"]], rotation=30)
    axes.set_yticks(range(len(spec["rows"])), [plain(r) for r in spec["rows"]])
    top = max((v for row in values for v in row), default=0)
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            colour = "white" if value > top / 2 else "black"
            axes.text(j, i, str(value), ha="center", va="center", fontsize=8, color=colour)
    axes.figure.colorbar(image, ax=axes)


def reliability(axes: Any, spec: dict[str, Any]) -> None:
    bins = spec["bins"]
    centres = [(b["low"] + b["high"]) / 2 for b in bins]
    axes.bar(centres, [b["accuracy"] for b in bins], width=0.09, label="share right")
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
    axes.plot(centres, [b["confidence"] for b in bins], "o", color="black", label="confidence")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel(f"confidence (expected calibration error {spec['ece']:.4f})")
    axes.set_ylabel("share right")
    axes.legend(fontsize=8, loc="upper left")


def scatter(axes: Any, spec: dict[str, Any]) -> None:
    axes.scatter(spec["x"], spec["y"], s=8, alpha=0.5)
    if spec.get("diagonal"):
        low = min(min(spec["x"]), min(spec["y"]))
        high = max(max(spec["x"]), max(spec["y"]))
        axes.plot([low, high], [low, high], linestyle="--", color="grey")
    else:
        axes.axhline(0, linestyle="--", color="grey")
    axes.set_xlabel(spec["xlabel"])
    axes.set_ylabel(spec["ylabel"])


DRAWERS = {"bars": bars, "matrix": matrix, "reliability": reliability, "scatter": scatter}
