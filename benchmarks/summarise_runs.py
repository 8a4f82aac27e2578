"""Summarise finished ``bistack train`` runs as a markdown table.

Run:  .venv/bin/python benchmarks/summarise_runs.py NAME=RUN_DIR [NAME=RUN_DIR ...]
Each RUN_DIR holds metrics.csv and model/config.json as ``bistack train`` writes them.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path


def summarise(name: str, run: Path) -> str:
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    best = max(rows, key=lambda r: float(r["dev_f1"]))
    config = json.loads((run / "model" / "config.json").read_text())["config"]
    encoder = config["encoder"]
    shape = (
        f"{'bi' if encoder['bidirectional'] else 'uni'}-{encoder['cell']} "
        f"{encoder['hidden_size']}x{encoder['num_layers']}, {config['head']['type']}, "
        f"chars {config['features']['char_encoder']}"
    )
    minutes = float(rows[-1]["seconds"]) / 60
    return (
        f"| {name} | {shape} | {float(best['dev_f1']):.2f} | {best['epoch']} | {len(rows)} | "
        f"{minutes:.0f} |"
    )


def main(arguments: list[str]) -> None:
    print("| run | model | best dev F1 | at epoch | epochs run | minutes |")
    print("|---|---|---:|---:|---:|---:|")
    for argument in arguments:
        name, _, path = argument.partition("=")
        print(summarise(name, Path(path)))


if __name__ == "__main__":
    main(sys.argv[1:])
