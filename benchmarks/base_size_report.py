"""The base-size table for CoNLL-2003: all-mpnet-base-v2's stacked tagger (its recipe is MiniLM's
with the backbone and its precision changed) beside MiniLM's shipped config, dev F1 as each
predicts (document consistency kept), per seed, with the backbone pass's and an epoch's time.

Run:  .venv/bin/python benchmarks/base_size_report.py
after ``bash benchmarks/base_size.sh conll03`` (runs in runs/benchmarks/base-size/). Only
finished runs are tabulated (a run still training is named as such, with its best so far).
Writes benchmarks/results/base-size/conll03.{md,json}.
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stacked_report import CACHE_LINE, run_summary

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "benchmarks" / "base-size"
RESULTS = ROOT / "benchmarks" / "results"
DEV_NOTE = (
    "Dev scores: each seed's epoch was chosen on that same dev set (early stopping), so they "
    "run a little above what CoNLL-2003's test set gives (the published anchors, about 92-94 "
    "for large transformers, are test scores); the test split is withheld."
)


def seed_row(run: Path) -> dict:
    """A finished run's summary (``run_summary``), or the best so far of one still training."""
    log = (run / "train.log").read_text() if (run / "train.log").exists() else ""
    cache = [int(s) for _, s in CACHE_LINE.findall(log)]
    finished = (run / "model" / "README.md").exists() and not (
        run / "checkpoint.safetensors"
    ).exists()
    if finished:
        row = run_summary(run, "dev_f1")
    else:
        rows = list(csv.DictReader((run / "metrics.csv").open()))
        best = max(rows, key=lambda r: float(r["dev_f1"]))
        row = {"score_so_far": float(best["dev_f1"]), "best_epoch": int(best["epoch"]),
               "epochs": len(rows)}  # fmt: skip
    return row | {"run": run.name, "finished": finished, "cache_build_seconds": sum(cache) or None}


def main() -> None:
    runs = sorted(r for r in RUNS.glob("conll03-seed*") if (r / "metrics.csv").is_file())
    if not runs:
        raise SystemExit(f"no runs in {RUNS}: bash benchmarks/base_size.sh conll03 first")
    seeds = [seed_row(run) for run in runs]
    minilm = json.loads((RESULTS / "stacked-conll03.json").read_text())["consistency"]
    record = {"mpnet": seeds, "minilm_shipped": minilm["seeds"]}
    out = RESULTS / "base-size"
    out.mkdir(parents=True, exist_ok=True)
    (out / "conll03.json").write_text(json.dumps(record, indent=1) + "\n")
    page = render(record)
    (out / "conll03.md").write_text(page)
    print(page)


def render(record: dict) -> str:
    """The page, from its JSON (``record``) alone."""
    seeds, minilm = record["mpnet"], {"seeds": record["minilm_shipped"]}
    done = [s["score"] for s in seeds if s["finished"]]

    def spread(scores: list[float]) -> str:
        if not scores:
            return "-"
        std = statistics.stdev(scores) if len(scores) > 1 else 0.0
        count = f"{len(scores)} seed" + ("s" if len(scores) > 1 else "")
        return f"{statistics.fmean(scores):.2f} ± {std:.2f} ({count})"

    lines = [
        "# CoNLL-2003 dev F1 at base size: all-mpnet-base-v2 beside all-MiniLM-L6-v2",
        "",
        "The shipped stacked tagger (last 4 layers side by side, each word the mean of its "
        "subwords, 64 subwords of document context a side, words, chars, casing, BiLSTM, CRF, "
        "document consistency), frozen backbone; MPNet's recipe "
        "(`configs/conll03-stacked-mpnet-crf.yaml`) is MiniLM's with only the backbone and its "
        "precision (`bf16-mixed`) changed: no setting was tuned on dev. Dev F1 as the model "
        "predicts (after document consistency), conlleval's entity F1.",
        "Command: `make backbones`, then `OMP_NUM_THREADS=1 bash benchmarks/base_size.sh "
        "conll03` and `.venv/bin/python benchmarks/base_size_report.py`.",
        "",
        "| backbone | dev F1 | per seed (best epoch) | s / epoch | backbone pass (cache build) |",
        "|---|---:|---|---:|---:|",
    ]
    per_seed = ", ".join(
        f"{s['score']:.2f} ({s['best_epoch']})"
        if s["finished"]
        else f"{s['run']} still training: best {s['score_so_far']:.2f} so far, at epoch "
        f"{s['best_epoch']} of {s['epochs']} run (without document consistency)"
        for s in seeds
    )
    epoch_seconds = [s["seconds_per_epoch"] for s in seeds if s["finished"]]
    cache = next((s["cache_build_seconds"] for s in seeds if s["cache_build_seconds"]), None)
    lines.append(
        f"| all-mpnet-base-v2 (bf16 pass) | {spread(done)} | {per_seed} | "
        f"{f'{statistics.median(epoch_seconds):.0f} (2 threads)' if epoch_seconds else '-'} | "
        f"{f'{cache} s (train and dev, 2 threads)' if cache else '-'} |"
    )
    lines.append(
        f"| all-MiniLM-L6-v2 (as shipped) | {spread([s['score'] for s in minilm['seeds']])} | "
        + ", ".join(f"{s['score']:.2f} ({s['best_epoch']})" for s in minilm["seeds"])
        + f" | {statistics.median(s['seconds_per_epoch'] for s in minilm['seeds']):.0f} "
        "(1 thread, two runs at a time) | - |"
    )
    lines += ["", DEV_NOTE, ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
