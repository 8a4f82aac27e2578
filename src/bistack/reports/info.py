"""``bistack info MODEL``: what a model directory or an exported directory holds, from its card
(``MODEL/README.md``) and its own files: kind, labels, size, dev metrics, what it was trained on
and by which bistack. A directory written before cards were says what its files say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bistack.predictor import open_model
from bistack.runs.model_card import read_card


def model_info(path: str | Path) -> dict[str, Any]:
    """Everything ``bistack info`` says of ``path``, as plain data."""
    info = open_model(path).info()
    card = read_card(path)
    info["directory"] = str(path)
    info["dev_metrics"] = card.get("metrics") if card else None
    info["card"] = card is not None
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
    ensemble = info.get("ensemble")
    if ensemble:
        cv = ensemble["cv"]
        metric = cv.get("metric", "score")
        folds = ", ".join(f"{name} {figure(v)}" for name, v in ensemble["folds"].items())
        if "blend" in ensemble:
            weights = ", ".join(
                f"{name} {weight:.3f}" for name, weight in ensemble["blend"].items()
            )
            lines.append(
                f"blended {metric}: {figure(cv['cv'])} nested on the out-of-fold predictions "
                f"({cv.get('split', '?')}; each fold's weights fitted on the other folds'), "
                f"{figure(cv['in_sample'])} in-sample; weights: {weights}"
            )
            if "verdict" in cv:
                lines.append(f"verdict: {cv['verdict']}")
            lines.append(f"each fold model on its held-out rows: {folds}")
        else:
            lines.append(
                f"cross-validated {metric}: {figure(cv['cv'])} on the out-of-fold predictions "
                f"({cv.get('split', '?')}); each fold on its held-out rows: {folds}"
            )
        if "temperature" in ensemble:
            lines.append(
                f"confidences: a temperature of {ensemble['temperature']:.3f}, fitted on the "
                "out-of-fold predictions"
            )
    elif info["dev_metrics"]:
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
