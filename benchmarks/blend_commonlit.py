"""CommonLit: three poolers over the frozen all-MiniLM-L6-v2, each reading every layer's token
mean (the config's ``layer_pooling.vectors``), cross-validated on one split and blended on
their out-of-fold predictions: each run's CV RMSE, its weight, the blend's nested RMSE (each
fold's weights fitted on the other folds' out-of-fold predictions) and its in-sample RMSE.

The command is the blend guide's walk (docs/blends.md), as written: ``bistack compare-poolers
configs/commonlit-minilm-layers.yaml --poolers lstm,gru,attention --folds 5 --blend``, each
run a ``bistack cv --inner-dev`` (each fold stopping early on a dev split of its training
folds) on all of ../shared/data/commonlit/train.csv; the backbone's vectors are computed once
and read from the feature cache by the other runs. Finished runs are reused.

Run:  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/blend_commonlit.py
Writes benchmarks/results/blend-commonlit.{md,json}; runs go to runs/compare-commonlit/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "compare-commonlit"
RESULTS = ROOT / "benchmarks" / "results"
# The guide's command, as written (run from the repository's root).
COMMAND = (
    "compare-poolers configs/commonlit-minilm-layers.yaml --poolers lstm,gru,attention "
    "--folds 5 --blend --output runs/compare-commonlit"
)
BISTACK = [sys.executable, "-m", "bistack"]


def main() -> None:
    if not (ROOT.parent / "shared" / "data" / "commonlit" / "train.csv").is_file():
        sys.exit("skipped: ../shared/data/commonlit/train.csv is not there")
    guide = (ROOT / "docs" / "blends.md").read_text()
    if f"bistack {COMMAND}" not in guide:
        sys.exit("the blend guide's walk no longer runs this command: make them one again")
    subprocess.run([*BISTACK, *COMMAND.split(), "--no-progress"], check=True, cwd=ROOT)
    blend = RUNS / "blend"
    record = json.loads((blend / "blend.json").read_text())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "blend-commonlit.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Blending three poolers' CVs on CommonLit (frozen all-MiniLM-L6-v2, layer means)",
        "",
        f"{record['rows']} rows, {record['folds']} folds ({record['split']}), each fold "
        "stopping early on a dev split of its training folds; weights by "
        f"{record['method']} ({record['objective']}).",
        "Command: `OMP_NUM_THREADS=2 .venv/bin/python benchmarks/blend_commonlit.py`, which runs "
        f"the blend guide's walk: `bistack {COMMAND}`.",
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
        f"Verdict: {record['verdict']['says']}; per fold: "
        + ", ".join(f"{d:+.4f}" for d in record["verdict"]["per_fold"])
        + ".",
        "",
    ]
    (RESULTS / "blend-commonlit.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
