"""``make bench``: bistack's speed against the bare nn.LSTM, pytorch-crf and Flair, in one run.

Every measurement runs in its own process (so its peak memory is its own); bistack's and
Flair's runs alternate, ``--rounds`` times, and each row reports the median. The sentences and
batches are fixed in a plan file both sides read, so both train and predict on the same data.

    .venv/bin/python benchmarks/speed.py [--rounds 3] [--threads N] [--quick]

Needs ``../shared/data`` (CoNLL-2003, SST-2); Flair rows need ``.venv-peers`` (``make bench``
creates it). Writes benchmarks/results/speed.{md,json} and speed_scaling.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from bistack.data.buckets import bucket_batches
from bistack.data.conll import read_conll
from bistack.data.tables import read_table
from speed_report import write_report

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
BATCHES = 60  # training batches of 32 per measurement (the first 3 are warm-up)
# Measured once (bistack only); the training and prediction rows alternate with Flair instead.
SINGLE_RUN = (
    "train-charcnn",
    "ablations",
    "encoder",
    "cells",
    "crf",
    "cache",
    "scaling",
    "profile",
    "onnx",
)


def make_plan(path: Path) -> None:
    """The shared sentences and batches: CoNLL-2003 train and dev, SST-2 sentences, CommonLit
    excerpts."""
    train = read_conll(DATA / "conll2003" / "train.txt")
    dev = read_conll(DATA / "conll2003" / "dev.txt")
    sst2 = read_table(DATA / "sst2" / "train.tsv", "sentence", ["label"])
    commonlit = read_table(DATA / "commonlit" / "train.csv", "excerpt", ["target"])
    lengths = [len(s.tokens) for s in train]
    order = list(range(len(train)))
    random.Random(0).shuffle(order)
    plan = {
        "tokens": [s.tokens for s in train],
        "tags": [s.tags for s in train],
        # Flair's trainer shuffles; bistack's trainer buckets by length (pools of 50 batches).
        "random_batches": [order[i : i + 32] for i in range(0, 32 * BATCHES, 32)],
        "bucketed_batches": bucket_batches(lengths, 32, shuffle=True, seed=0)[:BATCHES],
        "predict_tokens": [s.tokens for s in dev],
        "texts": [e.text for e in sst2[:1024]],
        "text_labels": [int(e.labels[0]) for e in sst2[:1024]],
        "long_texts": [e.text for e in commonlit[:256]],
        "long_text_targets": [float(e.labels[0]) for e in commonlit[:256]],
    }
    path.write_text(json.dumps(plan), encoding="utf-8")


def run_item(python: Path, script: Path, item: str, plan: Path, args) -> dict:
    command = [str(python), str(script), item, "--plan", str(plan), "--threads", str(args.threads)]
    if args.quick:
        command.append("--quick")
    print("  $", " ".join(command[1:3]), flush=True)
    env = os.environ | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{script.name} {item} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def merged(runs: list[dict]) -> list[dict]:
    """Rows of several rounds of one item: the median of every number, peak memory the max."""
    rows = []
    for parts in zip(*(run["rows"] for run in runs), strict=True):
        row = dict(parts[0])
        for key, value in row.items():
            if isinstance(value, float):
                row[key] = statistics.median(part[key] for part in parts)
            elif isinstance(value, dict):
                row[key] = {k: statistics.median(part[key][k] for part in parts) for k in value}
        row["peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
        rows.append(row)
    return rows


def measure(plan: Path, args) -> dict[str, list[dict]]:
    ours = ROOT / "benchmarks" / "speed_items.py"
    flair = ROOT / "benchmarks" / "peers" / "flair_speed.py"
    have_flair = PEER_PYTHON.exists()
    results: dict[str, list[dict]] = {}
    alternating = ["train-bucketed", "train-random", "predict"]
    runs: dict[str, list[dict]] = {}
    for round_number in range(args.rounds if not args.only else 0):
        print(f"round {round_number + 1}/{args.rounds}", flush=True)
        for item in alternating:
            runs.setdefault(f"bistack {item}", []).append(
                run_item(Path(sys.executable), ours, item, plan, args)
            )
            if have_flair:
                runs.setdefault(f"flair {item}", []).append(
                    run_item(PEER_PYTHON, flair, item, plan, args)
                )
    for item in SINGLE_RUN:
        if args.only and item not in args.only:
            continue
        runs[f"bistack {item}"] = [run_item(Path(sys.executable), ours, item, plan, args)]
    for name, item_runs in runs.items():
        results[name] = merged(item_runs)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round: a smoke run")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SINGLE_RUN,
        help="re-measure only these and update the existing results",
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    needed = [DATA / p for p in ("conll2003/train.txt", "sst2/train.tsv", "commonlit/train.csv")]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise SystemExit(f"skipping the benchmark: {', '.join(missing)} not found")
    with tempfile.TemporaryDirectory() as folder:
        plan = Path(folder) / "plan.json"
        make_plan(plan)
        results = measure(plan, args)
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, {args.threads} torch threads, "
        f"torch {torch.__version__}, Python {platform.python_version()}"
    )
    command = (
        f".venv/bin/python benchmarks/speed.py --rounds {args.rounds} --threads {args.threads}"
    )
    output = RESULTS / ("speed-quick" if args.quick else "speed")
    if args.only:  # keep every other measurement of the last full run
        previous = json.loads(output.with_suffix(".json").read_text(encoding="utf-8"))
        results = previous["results"] | results
        machine, command = previous["machine"], previous["command"]
        command += f"; then `... --threads {args.threads} --only {' '.join(args.only)}`"
        args.rounds = previous["rounds"]
    write_report(results, machine, command, args.rounds, output)
    print(f"wrote {output}.md, .json and _scaling.png")


if __name__ == "__main__":
    main()
