"""CommonLit: ``bistack cv`` of the shipped layer-pooling regressor, its fold ensemble against a
single model trained on the same rows, on a split neither saw; and the ensemble's prediction
time against one member's.

A seeded fifth of ../shared/data/commonlit/train.csv is held out (written under runs/, never into
the repository); on the rest, for each seed: ``bistack cv`` with 5 folds (OOF RMSE, each fold's
RMSE) and one ``bistack train`` run (15% dev split for early stopping), both with the config's
settings and that seed. Both are scored on the held-out fifth, and so is each fold model alone.
Prediction time: the ensemble and its first member predicting the held-out texts, alternately,
after a warm-up, several times (the ratio of medians, with each side's spread).

Run:  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/cv_commonlit.py [--seeds 1 2]
      (--timing-only: the scores kept, the prediction time measured again)
Writes benchmarks/results/cv-commonlit.{md,json}; runs go to runs/benchmarks/cv-commonlit/.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import time
from pathlib import Path

from bistack.cv.run import run_cv
from bistack.folds.settings import CVSettings
from bistack.predictor import open_model
from bistack.runs.driver import RunOptions
from bistack.tasks import load_config
from bistack.training import train_config

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "commonlit" / "train.csv"
CONFIG = ROOT / "configs" / "commonlit-minilm-layers.yaml"
RESULTS = ROOT / "benchmarks" / "results"
RUNS = ROOT / "runs" / "benchmarks" / "cv-commonlit"


def hold_out(fraction: float, seed: int) -> tuple[Path, Path]:
    """The shared file cut in two (seeded): rows to cross-validate, rows held out."""
    with DATA.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        fields, rows = reader.fieldnames, list(reader)
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    cut = round(len(rows) * fraction)
    held = set(order[:cut])
    RUNS.mkdir(parents=True, exist_ok=True)
    paths = RUNS / "cv-train.csv", RUNS / "held-out.csv"
    for path, keep in zip(paths, (False, True), strict=True):
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields or [])
            writer.writeheader()
            writer.writerows(row for i, row in enumerate(rows) if (i in held) == keep)
    return paths


def timed(predictor, texts: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        predictor.predict(texts)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--held-out", type=float, default=0.2)
    parser.add_argument("--timing-repeats", type=int, default=5)
    parser.add_argument(
        "--timing-only",
        action="store_true",
        help="keep the committed scores; time prediction again (on a quiet machine)",
    )
    args = parser.parse_args()
    cv_train, held_out = hold_out(args.held_out, seed=0)
    runs = []
    if args.timing_only:
        runs = json.loads((RESULTS / "cv-commonlit.json").read_text())["runs"]
    for seed in [] if args.timing_only else args.seeds:
        overrides = [f"data.train={cv_train}", f"train.seed={seed}", f"data.split_seed={seed}"]
        config = load_config(CONFIG, overrides)
        output = RUNS / f"cv-seed{seed}"
        started = time.monotonic()
        result = run_cv(config, output, CVSettings(args.folds), RunOptions(progress=False), print)
        cv_seconds = time.monotonic() - started
        ensemble = open_model(output / "model")
        members = [
            open_model(path).evaluate(held_out)["rmse"]
            for path in sorted((output / "model" / "members").iterdir())
        ]
        single_dir = RUNS / f"single-seed{seed}"
        if not (single_dir / "dev_metrics.json").exists():
            train_config(config, single_dir, RunOptions(progress=False, overwrite=True))
        single = open_model(single_dir / "model").evaluate(held_out)["rmse"]
        runs.append(
            {
                "seed": seed,
                "oof_rmse": result.cv,
                "fold_rmse": result.folds,
                "fold_mean": result.mean,
                "fold_std": result.std,
                "ensemble_held_out_rmse": ensemble.evaluate(held_out)["rmse"],
                "members_held_out_rmse": members,
                "single_held_out_rmse": single,
                "cv_seconds": cv_seconds,
            }
        )
        print(json.dumps(runs[-1]))
    texts = [row["excerpt"] for row in csv.DictReader(held_out.open(encoding="utf-8"))]
    ensemble = open_model(RUNS / f"cv-seed{args.seeds[0]}" / "model")
    member = open_model(RUNS / f"cv-seed{args.seeds[0]}" / "model" / "members" / "fold0")
    timed(ensemble, texts[:32], 1), timed(member, texts[:32], 1)  # warm-up
    ensemble_times, member_times = [], []
    for _ in range(args.timing_repeats):  # alternately, so drift hits both alike
        ensemble_times += timed(ensemble, texts, 1)
        member_times += timed(member, texts, 1)
    timing = {
        "texts": len(texts),
        "members": len(ensemble.model.members),
        "ensemble_seconds": ensemble_times,
        "member_seconds": member_times,
        "ratio_of_medians": statistics.median(ensemble_times) / statistics.median(member_times),
        "ratios": [e / m for e, m in zip(ensemble_times, member_times, strict=True)],
    }
    record = {"command": "OMP_NUM_THREADS=2 .venv/bin/python benchmarks/cv_commonlit.py"}
    record |= {"held_out_rows": len(texts), "runs": runs, "prediction_time": timing}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cv-commonlit.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / "cv-commonlit.md").write_text(report(record))
    print(report(record))


def report(record: dict) -> str:
    runs = record["runs"]
    lines = [
        "# CommonLit: 5-fold CV of the layer-pooling regressor, and its fold ensemble",
        "",
        f"Command: `{record['command']}`",
        "",
        "Config `configs/commonlit-minilm-layers.yaml` (frozen all-MiniLM-L6-v2, BiLSTM over the "
        "layers' token means). A seeded fifth of the shared `train.csv` "
        f"({record['held_out_rows']} rows) is held out; `bistack cv --folds 5` and one "
        "`bistack train` (15% dev split) each use the other rows, with the seed below. RMSE, "
        "lower is better.",
        "",
        "| seed | OOF RMSE (CV) | folds: mean ± sd | ensemble, held out | each fold model, held "
        "out | single model, held out | ensemble gain | CV minutes |",
        "|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for run in runs:
        members = ", ".join(f"{v:.4f}" for v in run["members_held_out_rmse"])
        gain = run["single_held_out_rmse"] - run["ensemble_held_out_rmse"]
        lines.append(
            f"| {run['seed']} | {run['oof_rmse']:.4f} | {run['fold_mean']:.4f} ± "
            f"{run['fold_std']:.4f} | {run['ensemble_held_out_rmse']:.4f} | {members} | "
            f"{run['single_held_out_rmse']:.4f} | {gain:+.4f} | {run['cv_seconds'] / 60:.1f} |"
        )
    gains = [r["single_held_out_rmse"] - r["ensemble_held_out_rmse"] for r in runs]
    singles = [r["single_held_out_rmse"] for r in runs]
    spread = statistics.stdev(singles) if len(singles) > 1 else 0.0
    timing = record["prediction_time"]
    lines += [
        "",
        f"Ensemble gain over the single model (single minus ensemble RMSE): mean "
        f"{statistics.fmean(gains):+.4f} over {len(runs)} seeds; the single model's own "
        f"seed-to-seed spread is {spread:.4f} (sd), the members' spread on the held-out rows "
        "is in the table.",
        "",
        f"Prediction time, {timing['texts']} held-out texts on this CPU: the "
        f"{timing['members']}-member ensemble takes {timing['ratio_of_medians']:.2f}x one "
        f"member's time (median of {len(timing['ensemble_seconds'])} alternating runs each; "
        f"ensemble {min(timing['ensemble_seconds']):.1f}-{max(timing['ensemble_seconds']):.1f} s, "
        f"member {min(timing['member_seconds']):.1f}-{max(timing['member_seconds']):.1f} s; "
        f"run by run {', '.join(f'{r:.2f}' for r in timing['ratios'])}x): "
        "the frozen backbone reads each text once and every member's head reads its vectors.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
