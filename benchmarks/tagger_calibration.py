"""Tagger temperatures measured honestly: fitted on one half of CoNLL-2003 dev, expected
calibration error of the entity confidences measured on the other half, both ways.

    .venv/bin/python benchmarks/tagger_calibration.py NAME=MODEL_DIR [NAME=MODEL_DIR ...]

e.g. ``bilstm-crf=runs/benchmarks/calibration/bilstm-crf/model`` (the shipped config at its
full budget: ``bistack train configs/conll03-bilstm-crf.yaml --set train.seed=1 --output
runs/benchmarks/calibration/bilstm-crf``) and
``stacked=runs/benchmarks/stacked-conll03/stacked-context-seed1/model`` (``bash
benchmarks/stacked.sh conll03 stacked-context``; benchmarks/results/stacked-conll03.md has its
held-out ECE per seed too). Each model is measured
as trained (temperature 1, whatever it keeps), by
``bistack.taggers.emissions.calibration.calibrate``, the
code ``bistack train`` runs after training: the halves are dev's first and second halves
(different documents). An entity counts as right when its span and type match a gold entity
(conlleval's rule); 10 equal-width bins. Writes benchmarks/results/tagger-calibration.{md,json}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bistack.data.tagged import read_tagged
from bistack.predictor import load_model
from bistack.taggers.emissions.calibration import calibrate

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "conll2003" / "dev.txt"
RESULTS = ROOT / "benchmarks" / "results"


def measure(name: str, model_dir: str) -> dict:
    tagger = load_model(model_dir)
    tagger.calibration = {}  # as trained
    dev = read_tagged(DEV, tagger.config.data)
    started = time.perf_counter()
    fit = calibrate(tagger, dev)
    seconds = time.perf_counter() - started
    if fit is None:
        raise SystemExit(f"{model_dir}: no entity predicted wrong on dev; nothing to fit")
    return {"name": name, "model": model_dir, "seconds": seconds, **fit.to_json()}


def report(rows: list[dict]) -> str:
    lines = [
        "# Tagger temperatures, fitted on half of CoNLL-2003 dev, measured on the other half",
        "",
        "Reproduce: `.venv/bin/python benchmarks/tagger_calibration.py "
        + " ".join(f"{r['name']}={r['model']}" for r in rows)
        + "`. Expected calibration error (ECE) of the entity confidences, 10 equal-width bins; "
        "an entity is right when span and type match a gold one. The temperature divides the "
        "emissions and the CRF's scores alike, so no predicted tag changes. Target: held-out "
        "ECE <= 0.02.",
        "",
        "| model | predicted dev entities | fitted on | T | ECE before (other half) "
        "| ECE after (other half) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        for half, measured in zip(("first half", "second half"), row["held_out"], strict=True):
            lines.append(
                f"| {row['name']} | {row['entities']} | {half} | {measured['temperature']:.3f} "
                f"| {measured['ece_before']:.4f} | {measured['ece_after']:.4f} |"
            )
        mean_before = sum(h["ece_before"] for h in row["held_out"]) / 2
        mean_after = sum(h["ece_after"] for h in row["held_out"]) / 2
        lines.append(
            f"| {row['name']} | | **mean of both** | | **{mean_before:.4f}** "
            f"| **{mean_after:.4f}** |"
        )
    lines += [
        "",
        "| model | T fitted on all of dev (what `bistack train` keeps) | ECE on dev before | after "
        "| fit time s |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['temperature']:.3f} | {row['ece_before']:.4f} "
            f"| {row['ece_after']:.4f} | {row['seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(pairs: list[str]) -> None:
    if not DEV.is_file():
        raise SystemExit(f"{DEV} is missing: this benchmark needs ../shared/data/conll2003")
    rows = []
    for pair in pairs:
        name, _, model_dir = pair.partition("=")
        rows.append(measure(name, model_dir))
        print(json.dumps(rows[-1]), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tagger-calibration.json").write_text(json.dumps(rows, indent=2) + "\n")
    (RESULTS / "tagger-calibration.md").write_text(report(rows))
    print(report(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
