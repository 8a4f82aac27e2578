"""``bistack info MODEL``: what a model directory or an exported directory holds, from its card
(``MODEL/README.md``) and its own files: kind, labels, size, dev metrics, what it was trained on
and by which bistack. A directory written before cards were says what its files say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bistack.files.modeldir import WEIGHTS
from bistack.runs.model_card import read_card
from bistack.tasks import open_model


def parameters_in(path: Path) -> int | None:
    """How many numbers the safetensors files in ``path`` (and a fine-tuned backbone's folder
    in it) hold, read from their headers alone."""
    files = [path / WEIGHTS, *sorted((path / "backbone").glob("*.safetensors"))]
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    total = 0
    for file in files:
        with file.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(size))
        for name, entry in header.items():
            if name != "__metadata__":
                count = 1
                for dim in entry["shape"]:
                    count *= dim
                total += count
    return total


def model_info(path: str | Path) -> dict[str, Any]:
    """Everything ``bistack info`` says of ``path``, as plain data."""
    opened = open_model(path)
    info = opened.info()
    card = read_card(path)
    info["directory"] = str(path)
    info["parameters"] = parameters_in(Path(path))
    if opened.exported:
        graph = Path(path) / "model.onnx"
        info["graph_bytes"] = graph.stat().st_size if graph.exists() else None
    info["dev_metrics"] = card.get("metrics") if card else None
    info["card"] = card is not None
    meta_file = Path(path) / ("export.json" if opened.exported else "config.json")
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    info["bistack_version"] = meta.get("bistack_version")
    return info


def described(info: dict[str, Any]) -> str:
    """``info`` as lines a person reads."""
    lines = [f"{info['directory']}: {info['description']} (kind {info['kind']})"]
    if info.get("entity_types"):  # a tagger of entities: its types, then the tags it learnt
        types = ", ".join(info["entity_types"])
        lines.append(f"entity types: {types}; predictions written in {info['scheme']} tags")
    if "labels" in info:
        shown = ", ".join(info["labels"][:20]) + (" ..." if len(info["labels"]) > 20 else "")
        named = "tags as trained" if info.get("entity_types") else "labels"
        lines.append(f"{named} ({len(info['labels'])}): {shown}")
    if info.get("vocabulary"):
        lines.append(f"vocabulary: {info['vocabulary']:,} words")
    lines.append(f"predicts from: {', '.join(info['inputs'])}")
    if info.get("parameters") is not None:
        lines.append(f"weights: {info['parameters']:,} numbers (parameters and buffers)")
    elif info.get("graph_bytes") is not None:
        lines.append(f"graph: {info['graph_bytes']:,} bytes (model.onnx)")
    trained = {k: v for k, v in info["trained_on"].items() if v}
    lines.append("trained on: " + (", ".join(f"{k} {v}" for k, v in trained.items()) or "?"))
    if info["dev_metrics"]:
        scores = ", ".join(
            f"{k.removeprefix('dev_')} {figure(v)}" for k, v in info["dev_metrics"].items()
        )
        lines.append(f"dev: {scores}")
    else:
        lines.append("dev: not recorded (no model card: written before bistack wrote them)")
    lines.append(f"written by bistack {info.get('bistack_version') or '?'}")
    return "\n".join(lines)


def figure(value: float) -> str:
    """A score as ``info`` prints every one: two decimals (a percentage, a perplexity), four
    for a value below 1 (an RMSE, a calibration error)."""
    return f"{value:.4f}" if abs(value) < 1 else f"{value:.2f}"
