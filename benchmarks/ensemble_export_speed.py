"""An exported fold ensemble's prediction time, against one exported member and against the
PyTorch ensemble: what one ONNX graph a member costs where the members share a frozen backbone.

The exported ensemble (``bistack export ENSEMBLE``) keeps each member as its own graph, the
backbone inside each: on onnxruntime the backbone runs once a member, where the PyTorch
ensemble runs it once. This times both, and one exported member, predicting the same texts
alternately after a warm-up (median and spread of ``--repeats`` runs each).

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_export_speed.py \\
          --ensemble runs/benchmarks/cv-commonlit/cv-seed2/model \\
          --texts runs/benchmarks/cv-commonlit/held-out.csv --threads 1
Writes benchmarks/results/ensemble-export-commonlit.{md,json}.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import tempfile
import time
from pathlib import Path

from bistack.export.onnx_export import export_model
from bistack.files.ensemble_dir import MEMBERS
from bistack.predictor import open_model

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def seconds(model, texts: list[str]) -> float:
    started = time.perf_counter()
    model.predict(texts)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ensemble", required=True)
    parser.add_argument("--texts", required=True, help="a CSV with an excerpt column")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with open(args.texts, newline="", encoding="utf-8") as handle:
        texts = [row["excerpt"] for row in csv.DictReader(handle)]
    with tempfile.TemporaryDirectory() as scratch:
        exported = export_model(args.ensemble, Path(scratch) / "onnx")
        first = sorted((exported / MEMBERS).iterdir())[0]
        sides = {
            "PyTorch ensemble": open_model(args.ensemble, threads=args.threads).model,
            "exported ensemble": open_model(exported, threads=args.threads).model,
            "one exported member": open_model(first, threads=args.threads).model,
        }
        for model in sides.values():
            seconds(model, texts[:16])  # warm-up
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.repeats):
            for name, model in sides.items():
                times[name].append(seconds(model, texts))
    medians = {name: statistics.median(values) for name, values in times.items()}
    member = medians["one exported member"]
    record = {"texts": len(texts), "threads": args.threads, "seconds": times}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ensemble-export-commonlit.json").write_text(json.dumps(record, indent=2) + "\n")
    members = len(json.loads((Path(args.ensemble) / "ensemble.json").read_text())["members"])
    lines = [
        "# An exported fold ensemble's prediction time (CommonLit, frozen MiniLM)",
        "",
        f"`OMP_NUM_THREADS={args.threads} .venv/bin/python benchmarks/ensemble_export_speed.py "
        f"--ensemble {args.ensemble} --texts {args.texts} --threads {args.threads}`: the "
        f"{members}-member ensemble of `bistack cv` (benchmarks/results/cv-commonlit.md, seed "
        f"2) predicting its {len(texts)} held-out excerpts, {args.threads} thread(s), "
        f"alternating, median of {args.repeats} after a warm-up.",
        "",
        "| model | seconds (median, min-max) | against one exported member |",
        "|---|---:|---:|",
    ]
    for name, values in times.items():
        lines.append(
            f"| {name} | {medians[name]:.1f} ({min(values):.1f}-{max(values):.1f}) | "
            f"{medians[name] / member:.2f}x |"
        )
    lines += [
        "",
        "The exported ensemble keeps one graph a member, the frozen backbone inside each, so "
        "onnxruntime runs the backbone once a member; the PyTorch ensemble runs it once for "
        "all. One graph holding the backbone once and every head is the way to close it.",
    ]
    (RESULTS / "ensemble-export-commonlit.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
