"""What a classifier's or regressor's evaluation report shows (``bistack evaluate MODEL DATA
--report DIR``), as plain data the report writer draws (``bistack.reports``): for a classifier
the confusion matrix, per-class scores, the reliability of its probabilities and its most
confident mistakes with their attention; for a regressor predicted against gold, residuals by
text length, RMSE and MAE per target and the largest errors. Torch-free: an exported model is
reported alike."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bistack.data.tables import read_table
from bistack.metrics.text import expected_calibration_error, reliability

WORST = 12


def examples_of(model: Any, path: str | Path) -> list:
    data = model.config.data
    return read_table(path, data.text_column, data.label_columns, file_format=data.format)


def shaded(prediction: Any) -> list[dict[str, Any]]:
    """A text as segments, each token with its attention weight (of the text's largest)."""
    if not prediction.attention:
        return [{"text": prediction.text}]
    top = max(w for _, w in prediction.attention) or 1.0
    segments, position = [], 0
    for token, weight in prediction.attention:
        if token.start > position:
            segments.append({"text": prediction.text[position : token.start]})
        segments.append({"text": token.text, "weight": weight / top})
        position = token.end
    if position < len(prediction.text):
        segments.append({"text": prediction.text[position:]})
    return segments


def classifier_report(model: Any, path: str | Path, model_dir: str | Path) -> dict[str, Any]:
    examples = examples_of(model, path)
    scores = model.score(examples, path)
    labels = model.labels
    matrix = scores["confusion_matrix"]["rows_gold_columns_predicted"]
    predictions = model.predict([e.text for e in examples], attention=model.attends)
    gold = [e.labels[0] for e in examples]
    confidence = [max(p.probabilities.values()) for p in predictions]
    right = [p.label == g for p, g in zip(predictions, gold, strict=True)]
    per_class = {}
    for i, label in enumerate(labels):
        found, predicted, total = matrix[i][i], sum(r[i] for r in matrix), sum(matrix[i])
        precision = 100 * found / predicted if predicted else 0.0
        recall = 100 * found / total if total else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[label] = {"precision": precision, "recall": recall, "f1": f1, "gold": total}
    bins = reliability(confidence, right)
    mistakes = sorted((i for i, ok in enumerate(right) if not ok), key=lambda i: -confidence[i])[
        :WORST
    ]
    return {
        "scores": scores.to_json(),
        "summary": str(scores),
        "per_class": per_class,
        "calibration": {
            "expected_calibration_error": expected_calibration_error(confidence, right),
            "bins": [b.__dict__ for b in bins],
        },
        "figures": [
            {
                "type": "matrix",
                "name": "confusion",
                "title": "gold class (rows) against predicted class (columns)",
                "rows": labels,
                "columns": labels,
                "values": matrix,
            },
            {
                "type": "bars",
                "name": "per-class",
                "title": "precision, recall and F1 per class",
                "labels": labels,
                "series": {
                    m: [per_class[c][m] for c in labels] for m in ("precision", "recall", "f1")
                },
                "ylabel": "score (0-100)",
            },
            {
                "type": "reliability",
                "name": "reliability",
                "title": "predicted class's probability against the share right",
                "bins": [b.__dict__ for b in bins],
                "ece": expected_calibration_error(confidence, right),
            },
        ],
        "examples": [
            {
                "title": "the most confident mistakes"
                + (" (tokens shaded by attention)" if model.attends else ""),
                "items": [
                    {
                        "where": f"row {examples[i].row}",
                        "gold": gold[i],
                        "predicted": f"{predictions[i].label} ({confidence[i]:.3f})",
                        "text": shaded(predictions[i]),
                    }
                    for i in mistakes
                ],
            }
        ],
        "notes": [],
    }


def regressor_report(model: Any, path: str | Path, model_dir: str | Path) -> dict[str, Any]:
    from bistack.data.tables import parse_targets

    examples = examples_of(model, path)
    scores = model.score(examples, path)
    targets = model.labels
    gold = parse_targets(examples, targets, path)
    predictions = model.predict([e.text for e in examples])
    lengths = [len(e.text.split()) for e in examples]
    per_target, figures, worst = {}, [], []
    for j, name in enumerate(targets):
        got = [p.values[name] for p in predictions]
        want = [g[j] for g in gold]
        residuals = [a - b for a, b in zip(got, want, strict=True)]
        per_target[name] = {
            "rmse": math.sqrt(sum(r * r for r in residuals) / len(residuals)),
            "mae": sum(abs(r) for r in residuals) / len(residuals),
        }
        figures.append(
            {
                "type": "scatter",
                "name": f"predicted-{j}",
                "title": f"{name}: predicted against gold",
                "x": want,
                "y": got,
                "xlabel": "gold",
                "ylabel": "predicted",
                "diagonal": True,
            }
        )
        figures.append(
            {
                "type": "scatter",
                "name": f"residuals-{j}",
                "title": f"{name}: residual (predicted - gold) by text length",
                "x": lengths,
                "y": residuals,
                "xlabel": "words",
                "ylabel": "residual",
            }
        )
        order = sorted(range(len(residuals)), key=lambda i: -abs(residuals[i]))[:WORST]
        worst += [
            {
                "where": f"row {examples[i].row}",
                "target": name,
                "gold": want[i],
                "predicted": got[i],
                "text": [{"text": examples[i].text}],
            }
            for i in order
        ]
    return {
        "scores": scores.to_json(),
        "summary": str(scores),
        "per_target": per_target,
        "tables": [
            {
                "title": "error per target (original units)",
                "columns": ["target", "RMSE", "MAE"],
                "rows": [[n, v["rmse"], v["mae"]] for n, v in per_target.items()],
            }
        ],
        "figures": figures,
        "examples": [{"title": "the largest errors", "items": worst}],
        "notes": [],
    }
