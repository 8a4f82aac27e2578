"""A model card in every model directory: ``MODEL/README.md``, in the shape of a HuggingFace
model card (YAML front matter a hub and other tools read, then the training summary in words),
written when a run has its final model, and read back by ``bistack info``."""

from __future__ import annotations

import csv
import dataclasses
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bistack._version import __version__
from bistack.errors import ModelFileError
from bistack.files.modeldir import atomic_write

CARD = "README.md"


@dataclass(frozen=True)
class Trained:
    """What a finished run says of its model: its kind and description, what its outputs
    are (``describe()``: the front matter carries it, labels included), the config and the
    sections of it that say what the model is (its class's ``SUMMARY_KEYS``), the one-line data
    summary and the kind's notes (lines its family adds), trained parameters, epochs run, the
    best epoch and its dev metrics (metrics.csv's row), and seconds spent."""

    kind: str
    description: str
    outputs: dict[str, Any]
    config: dict[str, Any]
    summary_keys: tuple[str, ...]
    summary: str
    notes: tuple[str, ...]
    parameters: int
    epochs: int
    best_epoch: int
    metrics: dict[str, float]
    seconds: float
    # A digest of each data file read ({"data.train": ...}, ``bistack.files.fingerprints``), so what
    # reads the file again later (the report's seen and unseen entities) knows it is the same.
    data_digests: dict[str, str] = dataclasses.field(default_factory=dict)
    best_step: int = 0  # validated every few steps (train.eval_every): the best one's step


def best_metrics(metrics_csv: Path, epoch: int, step: int = 0) -> tuple[dict[str, float], float]:
    """The dev metrics of ``epoch`` (or, validated every few steps, of optimizer ``step``) in a
    run's metrics.csv, and the seconds the run took (its ``seconds`` column counts from the
    start)."""
    if not metrics_csv.exists():
        return {}, 0.0
    with metrics_csv.open() as handle:
        rows = list(csv.DictReader(handle))
    chosen = next(
        (r for r in rows if int(r["epoch"]) == epoch and int(r.get("step") or step) == step),
        {},
    )
    metrics = {k: float(v) for k, v in chosen.items() if k.startswith("dev_") and v != ""}
    seconds = max((float(r.get("seconds") or 0) for r in rows), default=0.0)
    return metrics, seconds


def front_matter(trained: Trained) -> dict[str, Any]:
    """The card's YAML header: what a model hub indexes."""
    data = trained.config.get("data", {})
    files = {key: data.get(key) for key in ("train", "dev") if data.get(key)}
    header: dict[str, Any] = {
        "library_name": "bistack",
        "tags": ["bistack", trained.kind],
        "kind": trained.kind,
    }
    header |= {key: value for key, value in trained.outputs.items() if key not in header}
    header["data_files"] = files
    if trained.data_digests:
        header["data_digests"] = dict(trained.data_digests)
    header["metrics"] = {name: round(value, 4) for name, value in trained.metrics.items()}
    header["model-index"] = [
        {
            "name": trained.kind,
            "results": [
                {
                    "dataset": {"name": files.get("dev") or files.get("train", ""), "split": "dev"},
                    "metrics": [
                        {"type": name.removeprefix("dev_"), "name": name, "value": value}
                        for name, value in header["metrics"].items()
                    ],
                }
            ],
        }
    ]
    return header


def render(trained: Trained, torch_version: str) -> str:
    """The whole card: front matter, then the summary in words."""
    header = yaml.safe_dump(front_matter(trained), sort_keys=False, allow_unicode=True)
    config = trained.config
    settings = {key: config[key] for key in trained.summary_keys if config.get(key) is not None}
    scores = ", ".join(f"{k.removeprefix('dev_')} {v:.4g}" for k, v in trained.metrics.items())
    minutes = trained.seconds / 60
    best_step = f" (optimizer step {trained.best_step})" if trained.best_step else ""
    lines = [
        "---",
        header.rstrip(),
        "---",
        "",
        f"# {trained.description} (bistack `{trained.kind}`)",
        "",
        f"- **Data**: {trained.summary}.",
        f"- **Training**: {trained.epochs} epochs in {minutes:.1f} minutes; the best dev score "
        f"at epoch {trained.best_epoch}{best_step}, whose weights these are; "
        f"{trained.parameters:,} trained parameters.",
        f"- **Dev scores** (epoch {trained.best_epoch}{best_step}): {scores or 'none recorded'}.",
        *(f"- {note}" for note in trained.notes),
        f"- **Made with** bistack {__version__}, torch {torch_version}, Python "
        f"{platform.python_version()}.",
        "",
        "## The settings that matter",
        "",
        "```yaml",
        yaml.safe_dump(settings, sort_keys=False).rstrip(),
        "```",
        "",
        "## Use it",
        "",
        "```",
        'bistack predict MODEL_DIR "Some text to predict." --format jsonl',
        "bistack evaluate MODEL_DIR DATA_FILE --report report/",
        "bistack info MODEL_DIR",
        "```",
        "",
        "```python",
        "from bistack.api import open_model",
        "",
        'print(open_model("MODEL_DIR").predict(["Some text to predict."]))',
        "```",
        "",
        "The full config is in `config.json`; the weights (`model.safetensors`) load without "
        "unpickling anything.",
        "",
    ]
    return "\n".join(lines)


def write_card(directory: Path, trained: Trained, torch_version: str) -> None:
    atomic_write(directory / CARD, lambda tmp: Path(tmp).write_text(render(trained, torch_version)))


def read_card(directory: str | Path) -> dict[str, Any] | None:
    """A model card's front matter, or None when the directory has no card (written before
    cards were, or removed)."""
    path = Path(directory) / CARD
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ModelFileError(
            f"{path}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
            f"{error.start}); restore the card bistack wrote, or remove it"
        ) from None
    if not text.startswith("---\n"):
        return None
    header, _, _ = text[4:].partition("\n---\n")
    try:
        data = yaml.safe_load(header)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None
