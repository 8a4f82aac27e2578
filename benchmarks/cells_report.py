"""The cells table: dev score of each cell and depth over its seeds, its seconds per epoch, and
whether its gap to the LSTM of the same depth is beyond the seed noise (the ladder's rule,
2·sqrt(s_a²/n_a + s_b²/n_b)).

Run:  .venv/bin/python benchmarks/cells_report.py conll03|sst2
after ``bash benchmarks/cells.sh DATA`` (runs in runs/benchmarks/cells-DATA/CELL-Nl-seedS).
Writes benchmarks/results/cells-DATA.{md,json}; only finished runs count.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
CELLS = ("lstm", "mingru", "minlstm")


def finished(run: Path) -> bool:
    return (run / "model" / "model.safetensors").exists() and not (
        run / "checkpoint.safetensors"
    ).exists()


def summary(run: Path, column: str) -> dict:
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    return {
        "score": max(float(r[column]) for r in rows),
        "seconds_per_epoch": float(rows[-1]["seconds"]) / len(rows),
        "epochs": len(rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data", choices=["conll03", "sst2"])
    args = parser.parse_args()
    column = "dev_f1" if args.data == "conll03" else "dev_accuracy"
    base = Path("runs/benchmarks") / f"cells-{args.data}"
    table: dict[str, dict] = {}
    for layers in (1, 2, 3):
        for cell in CELLS:
            runs = [r for r in sorted(base.glob(f"{cell}-{layers}l-seed*")) if finished(r)]
            if not runs:
                continue
            seeds = [summary(r, column) for r in runs]
            scores = [s["score"] for s in seeds]
            table[f"{cell}-{layers}"] = {
                "cell": cell,
                "layers": layers,
                "scores": scores,
                "mean": statistics.mean(scores),
                "std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
                "seconds_per_epoch": statistics.mean(s["seconds_per_epoch"] for s in seeds),
                "epochs": seeds[0]["epochs"],
            }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"cells-{args.data}.json").write_text(json.dumps(table, indent=2) + "\n")
    text = markdown(args.data, table, "entity F1" if column == "dev_f1" else "accuracy")
    (RESULTS / f"cells-{args.data}.md").write_text(text)
    print(text)


def markdown(data: str, table: dict[str, dict], metric: str) -> str:
    epochs = next(iter(table.values()))["epochs"] if table else 0
    lines = [
        f"# minGRU and minLSTM against the LSTM, {data} dev {metric} ({epochs} epochs each)",
        "",
        f"Reproduce: `OMP_NUM_THREADS=1 bash benchmarks/cells.sh {data}` then "
        f"`.venv/bin/python benchmarks/cells_report.py {data}`. Every run has the same epoch "
        "budget; seconds per epoch include dev scoring, on one thread beside other work, so "
        "compare them within this table. A gap is real when it exceeds 2·sqrt(s_a²/n_a + "
        "s_b²/n_b).",
        "",
        "| cell | layers | seeds | dev (mean ± std) | s / epoch | vs the LSTM of that depth |"
        " speed vs that LSTM |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for row in table.values():
        lstm = table.get(f"lstm-{row['layers']}")
        verdict, speed = "-", "-"
        if lstm is not None and row["cell"] != "lstm":
            gap = row["mean"] - lstm["mean"]
            noise = 2 * math.sqrt(
                row["std"] ** 2 / len(row["scores"]) + lstm["std"] ** 2 / len(lstm["scores"])
            )
            real = "beyond" if abs(gap) > noise else "within"
            verdict = f"{gap:+.2f} ({real} the noise, {noise:.2f})"
            if min(len(row["scores"]), len(lstm["scores"])) < 2:  # one seed has no spread
                verdict = f"{gap:+.2f} (noise unknown: one seed)"
            speed = f"{lstm['seconds_per_epoch'] / row['seconds_per_epoch']:.2f}x"
        lines.append(
            f"| {row['cell']} | {row['layers']} | {len(row['scores'])} | {row['mean']:.2f} ± "
            f"{row['std']:.2f} | {row['seconds_per_epoch']:.0f} | {verdict} | {speed} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
