"""``bistack explain``: show which tokens the attention pooling weighted, as HTML and a PNG.

A high weight means "this state contributed heavily to the pooled vector", not "this word caused
the prediction": attention is not an explanation (Jain & Wallace 2019).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from bistack.errors import ConfigError, needs_extra
from bistack.files.modeldir import atomic_write
from bistack.text_models.base import TextModelBase
from bistack.text_models.prediction import TextPrediction


def explain(model: TextModelBase, texts: Sequence[str], output: str | Path) -> tuple[Path, Path]:
    """Write ``output/explain.html`` and ``output/explain.png``; return both paths."""
    refusal = model.attention_refusal()
    if refusal is not None:
        raise ConfigError(f"no token weights to explain: {refusal}")
    try:
        import matplotlib  # noqa: F401 - checked before anything is written
    except ImportError as error:
        raise ConfigError(needs_extra("explain's heatmap", "plots", error)) from None
    predictions = model.predict(texts, attention=True)
    output = Path(output)
    page, chart = output / "explain.html", output / "explain.png"
    atomic_write(page, lambda tmp: Path(tmp).write_text(render_html(predictions), "utf-8"))
    atomic_write(chart, lambda tmp: render_png(predictions, tmp))
    return page, chart


def describe(prediction: TextPrediction) -> str:
    if prediction.label is not None:
        assert prediction.probabilities is not None
        return f"{prediction.label} ({prediction.probabilities[prediction.label]:.2f})"
    assert prediction.values is not None
    return ", ".join(f"{name} {value:.3f}" for name, value in prediction.values.items())


def render_html(predictions: Sequence[TextPrediction]) -> str:
    """Tokens shaded by attention weight (darkest = the highest weight of its text)."""
    rows = []
    for prediction in predictions:
        assert prediction.attention is not None
        top = max(weight for _, weight in prediction.attention) or 1.0
        spans = " ".join(
            f'<span title="{weight:.3f}" style="background: rgba(220, 60, 30, '
            f'{weight / top:.3f})">{html.escape(token.text)}</span>'
            for token, weight in prediction.attention
        )
        rows.append(f"<p><b>{html.escape(describe(prediction))}</b><br>{spans}</p>")
    return (
        "<!doctype html><meta charset='utf-8'><title>bistack attention</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:2}"
        "span{padding:2px 3px;border-radius:3px}</style>"
        "<h1>Attention weights</h1><p>Hover a token for its weight. A high weight means the "
        "token's state contributed heavily to the pooled vector, not that the word caused the "
        "prediction.</p>" + "\n".join(rows) + "\n"
    )


def plain(text: str) -> str:
    """``text`` as matplotlib should draw it: a ``$`` is a dollar sign, not the start of math."""
    return text.replace("$", r"\$")


def render_png(predictions: Sequence[TextPrediction], path: str) -> None:
    """A heatmap: one row per text, one cell per token."""
    import numpy as np
    from matplotlib.figure import Figure  # a Figure of its own: no pyplot, no backend chosen

    width = max(len(p.attention or []) for p in predictions)
    grid = np.full((len(predictions), width), np.nan)
    for row, prediction in enumerate(predictions):
        for column, (_, weight) in enumerate(prediction.attention or []):
            grid[row, column] = weight
    figure = Figure(
        figsize=(max(6, 0.7 * width), 1.0 + 0.8 * len(predictions)), constrained_layout=True
    )
    axes = figure.subplots()
    image = axes.imshow(grid, cmap="Reds", aspect="auto", vmin=0)
    for row, prediction in enumerate(predictions):
        for column, (token, weight) in enumerate(prediction.attention or []):
            color = "white" if weight > 0.6 * np.nanmax(grid[row]) else "black"
            text = plain(token.text)
            axes.text(column, row, text, ha="center", va="center", fontsize=8, color=color)
    axes.set_yticks(range(len(predictions)), [plain(describe(p)) for p in predictions])
    axes.set_xticks([])
    axes.set_title("attention weight per token")
    figure.colorbar(image, ax=axes, label="weight")
    figure.savefig(path, format="png", dpi=120)
