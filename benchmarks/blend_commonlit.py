"""CommonLit: five poolers over the frozen all-MiniLM-L6-v2 cross-validated on one split, then
blended on their out-of-fold predictions (``bistack blend``): each run's CV RMSE, its weight,
the blend's nested RMSE (each fold's weights fitted on the other folds' out-of-fold
predictions) and its in-sample RMSE.

Every run is ``bistack cv configs/commonlit-minilm-layers.yaml --folds 5 --inner-dev`` with
``layer_pooling.type`` set (the layers' token means read by an LSTM, a GRU, attention over
layers, a learned weighted sum, a plain mean), on all of ../shared/data/commonlit/train.csv;
the backbone's vectors are computed once and read from the feature cache by the other runs.
A finished run is reused.

Run:  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/blend_commonlit.py
Writes benchmarks/results/blend-commonlit.{md,json}; runs go to runs/blend-commonlit/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "blend-commonlit"
RESULTS = ROOT / "benchmarks" / "results"
POOLERS = ("lstm", "gru", "attention", "weighted", "mean")
BISTACK = [sys.executable, "-m", "bistack"]


def main() -> None:
    if not (ROOT.parent / "shared" / "data" / "commonlit" / "train.csv").is_file():
        sys.exit("skipped: ../shared/data/commonlit/train.csv is not there")
    for pooler in POOLERS:
        if not (RUNS / pooler / "cv.json").is_file():
            subprocess.run(
                [*BISTACK, "cv", str(ROOT / "configs" / "commonlit-minilm-layers.yaml"),
                 "--folds", "5", "--inner-dev", "--set", f"layer_pooling.type={pooler}",
                 "--output", str(RUNS / pooler), "--no-progress"],
                check=True,
            )  # fmt: skip
    blend = RUNS / "blend"
    subprocess.run(
        [*BISTACK, "blend", *(str(RUNS / p) for p in POOLERS), "--output", str(blend),
         "--overwrite"],
        check=True,
    )  # fmt: skip
    record = json.loads((blend / "blend.json").read_text())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "blend-commonlit.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Blending five poolers' CVs on CommonLit (frozen all-MiniLM-L6-v2)",
        "",
        f"{record['rows']} rows, {record['folds']} folds ({record['split']}), each fold "
        "stopping early on a dev split of its training folds; weights by "
        f"{record['method']} ({record['objective']}).",
        "Command: `OMP_NUM_THREADS=2 .venv/bin/python benchmarks/blend_commonlit.py`.",
        "",
        "| run | CV RMSE | weight | blend without it (in-sample) |",
        "|---|---|---|---|",
    ]
    for run in record["runs"]:
        lines.append(f"| {run['name']} | {run['cv']:.4f} | {run['weight']:.3f} | "
                     f"{run['blend_without_it']:.4f} |")  # fmt: skip
    scores = record["scores"]
    best = min(run["cv"] for run in record["runs"])
    lines += [
        f"| **blend, nested** | **{scores['nested']:.4f}** | | |",
        f"| blend, in-sample (optimistic) | {scores['in_sample']:.4f} | | |",
        "",
        f"The nested blend is {best - scores['nested']:.4f} RMSE below the best run's CV.",
        "",
    ]
    (RESULTS / "blend-commonlit.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
