"""Summarise finished ``bistack train`` runs as a markdown table.

Run:  .venv/bin/python benchmarks/summarise_runs.py [--max-epoch N] NAME=RUN_DIR [...]
Each RUN_DIR holds metrics.csv and model/config.json as ``bistack train`` writes them.
``--max-epoch N`` reads only the first N epochs, so runs compare at the same budget.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def summarise(name: str, run: Path, max_epoch: int | None) -> str:
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    rows = [r for r in rows if max_epoch is None or int(r["epoch"]) <= max_epoch]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-epoch", type=int)
    parser.add_argument("runs", nargs="+", metavar="NAME=RUN_DIR")
    args = parser.parse_args()
    print("| run | model | best dev F1 | at epoch | epochs read | minutes |")
    print("|---|---|---:|---:|---:|---:|")
    for argument in args.runs:
        name, _, path = argument.partition("=")
        print(summarise(name, Path(path), args.max_epoch))


if __name__ == "__main__":
    main()
