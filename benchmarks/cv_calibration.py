"""CommonLit: how far ``bistack cv``'s default mode (each fold stops early on its held-out fold;
its calibration cross-fitted on the other folds) sits from ``--inner-dev`` (each fold stops and
calibrates on a dev split of its training folds), with the shipped ``commonlit-bilstm`` recipe
(``regression.calibrate`` on).

A seeded cut of ``--rows`` rows of ../shared/data/commonlit/train.csv (written under runs/,
never into the repository) is cross-validated with 5 folds in each mode, for each seed
(``data.split_seed``). Reported: the CV RMSE of each, and, per fold, the least-squares line of
the held-out gold on the fold's out-of-fold values (slope 1 and intercept 0 exactly would mean
the fold's calibration was fitted on its own held-out rows, as it was before this change).

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/cv_calibration.py [--rows 600] [--seeds 0 1]
Writes benchmarks/results/cv-calibration.{md,json}; runs go to runs/benchmarks/cv-calibration/.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

import numpy as np
import torch

import bistack

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "commonlit" / "train.csv"
CONFIG = ROOT / "configs" / "commonlit-bilstm.yaml"
RESULTS = ROOT / "benchmarks" / "results"
RUNS = ROOT / "runs" / "benchmarks" / "cv-calibration"


def cut(rows: int, seed: int) -> Path:
    """``rows`` rows of the shared file, drawn with ``seed``."""
    with DATA.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        fields, table = reader.fieldnames or [], list(reader)
    chosen = sorted(random.Random(seed).sample(range(len(table)), rows))
    RUNS.mkdir(parents=True, exist_ok=True)
    path = RUNS / f"cut-{rows}-{seed}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(table[i] for i in chosen)
    return path


def fold_lines(out: Path) -> list[list[float]]:
    """Per fold: slope and intercept of held-out gold regressed on the fold's OOF values."""
    with (out / "oof.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    lines = []
    for fold in sorted({r["fold"] for r in rows}):
        mine = [r for r in rows if r["fold"] == fold]
        values = np.array([float(r["target"]) for r in mine])
        gold = np.array([float(r["gold_target"]) for r in mine])
        lines.append([float(v) for v in np.polyfit(values, gold, 1)])
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = []
    for seed in args.seeds:
        train = cut(args.rows, seed)
        overrides = {"data.train": str(train), "data.split_seed": seed}
        row: dict = {"seed": seed}
        for mode, inner in (("default", False), ("inner_dev", True)):
            out = RUNS / f"{mode}-{args.rows}-{seed}"
            result = bistack.cross_validate(
                str(CONFIG), out, overrides, folds=args.folds, inner_dev=inner, say=print
            )
            row[mode] = {"cv_rmse": result.cv, "fold_lines": fold_lines(out)}
        results.append(row)
        print(json.dumps(row))
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = {"rows": args.rows, "folds": args.folds, "config": CONFIG.name, "results": results}
    (RESULTS / "cv-calibration.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Cross-validation's default mode against --inner-dev (CommonLit)",
        "",
        f"`{CONFIG.name}` on a seeded {args.rows}-row cut of CommonLit's training file, "
        f"{args.folds} folds, one thread. Default: each fold stops early on its held-out fold "
        "and its calibration is fitted on the other folds' out-of-fold values. `--inner-dev`: "
        "each fold stops and calibrates on a 15% dev split of its training folds. Per fold: "
        "slope and intercept of the held-out gold regressed on the fold's OOF values (1 and 0 "
        "exactly would mean the calibration saw the held-out rows).",
        "",
        "Command: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/cv_calibration.py "
        f"--rows {args.rows} --seeds {' '.join(map(str, args.seeds))}`",
        "",
        "| seed | default CV RMSE | --inner-dev CV RMSE | default per-fold (slope, intercept) |",
        "|---|---|---|---|",
    ]
    for row in results:
        folds = "; ".join(f"{a:.3f}, {b:+.3f}" for a, b in row["default"]["fold_lines"])
        lines.append(
            f"| {row['seed']} | {row['default']['cv_rmse']:.4f} | "
            f"{row['inner_dev']['cv_rmse']:.4f} | {folds} |"
        )
    (RESULTS / "cv-calibration.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
