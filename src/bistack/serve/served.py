"""What the server serves: a model directory (PyTorch) or an exported one (onnxruntime), with
what its kind offers, read from the task table (or from the export, which the table wrote)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.export.runtime import is_exported, load_exported


@dataclass(frozen=True)
class Served:
    """A loaded model and what it offers.

    kind, description: from the task table; view: how the page shows a prediction; options:
    the ``predict`` options it takes; samples: whether it continues text instead of predicting;
    info: what ``GET /info`` says of it.
    """

    model: Any
    kind: str
    description: str
    view: str
    options: frozenset[str]
    samples: bool
    info: dict[str, Any]

    def predict(self, texts: Sequence[str], options: dict[str, Any]) -> list[dict[str, Any]]:
        """The records ``bistack predict --format jsonl`` writes, one per text."""
        return [p.to_json() for p in self.model.predict(list(texts), **options)]

    def sample(self, prompt: str, tokens: int, temperature: float, seed: int | None) -> str:
        continuation = self.model.sample(prompt, tokens, temperature, seed)
        return " ".join(continuation)


def load_served(path: str | Path) -> Served:
    """Load ``path`` as the server will run it, and run it once, so that a model that cannot
    predict fails here, before the port is bound, and the first request waits for nothing."""
    served = loaded(path)
    if served.samples:
        served.sample("", 1, 1.0, 0)
    else:
        served.predict(["Warm up ."], {})
    return served


def loaded(path: str | Path) -> Served:
    if is_exported(path):
        exported = load_exported(path)
        meta = exported.meta
        return Served(
            exported,
            meta["kind"],
            exported.description,
            meta.get("view", "classes"),
            exported.PREDICT_OPTIONS,
            samples=False,
            info=describe(meta["kind"], exported.description, exported, meta["config"], True),
        )
    from bistack.tasks import task_of_directory

    task = task_of_directory(path)
    model = task.model.load(path)
    options = task.predict_options
    return Served(
        model,
        task.kind,
        task.description,
        task.view,
        options,
        samples=not task.predict_formats,
        info=describe(task.kind, task.description, model, model.config.to_dict(), False),
    )


def describe(
    kind: str, description: str, model: Any, config: dict[str, Any], exported: bool
) -> dict[str, Any]:
    """Kind, labels, tagging scheme and a summary of the training config."""
    info: dict[str, Any] = {"kind": kind, "description": description, "exported": exported}
    labels = getattr(model, "labels", None)
    if labels is not None:
        info["labels"] = list(labels)
    scheme = getattr(model, "output_scheme", None)
    if scheme:
        info["scheme"] = scheme
        info["entity_types"] = sorted({label.partition("-")[2] for label in labels or []} - {""})
    summary_keys = ("features", "encoder", "head", "pooling", "backbone", "layer_pooling")
    info["config"] = {key: config[key] for key in summary_keys if key in config}
    info["trained_on"] = {k: config.get("data", {}).get(k) for k in ("train", "dev")}
    return info
