"""Taggers blend: two tagger CVs of a CoNLL-2003 cut (the BiLSTM-CRF recipe and a GRU variant
of it, the same folds), blended by their out-of-fold token marginals; the nested out-of-fold
entity F1 beside each run's CV F1, and the verdict.

The cut is the first ``--documents`` documents of CoNLL-2003's training file (written under
``runs/blend-conll03/documentsN``, never committed); each CV stops its folds on a dev split of their
training folds (``--inner-dev``) so that the held-out folds choose nothing. A killed run
resumes at its first unfinished fold.

Run:  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/blend_conll03.py
Writes benchmarks/results/blend-conll03.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

import bistack

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "conll2003" / "train.txt"
RESULTS = ROOT / "benchmarks" / "results"
RUNS = {  # name: overrides of configs/conll03-bilstm-crf.yaml
    "bilstm-crf": {},
    "bigru-crf": {"encoder.cell": "gru"},
}


def cut(source: Path, target: Path, documents: int) -> int:
    """The first ``documents`` documents of ``source`` into ``target``; its sentences."""
    kept, seen = [], 0
    for line in source.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("-DOCSTART-"):
            seen += 1
            if seen > documents:
                break
        kept.append(line)
    target.write_text("".join(kept), encoding="utf-8")
    return sum(
        1 for block in "".join(kept).split("\n\n") if block.strip() and "-DOCSTART-" not in block
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=130)  # about 2,000 sentences
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--max-epochs", type=int, default=25)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not DATA.is_file():
        print(f"skipped: {DATA} is absent (the shared CoNLL-2003 data)")
        return 0
    torch.set_num_threads(args.threads)
    work = ROOT / "runs" / "blend-conll03" / f"documents{args.documents}"
    work.mkdir(parents=True, exist_ok=True)
    train = work / "train-cut.txt"
    sentences = cut(DATA, train, args.documents)
    started = time.perf_counter()
    outputs = []
    for name, overrides in RUNS.items():
        settings = {
            "data.train": str(train),
            "data.dev": None,
            "train.max_epochs": args.max_epochs,
            "train.patience": 5,
        } | overrides
        output = work / name
        bistack.cross_validate(
            ROOT / "configs" / "conll03-bilstm-crf.yaml",
            output,
            settings,
            folds=args.folds,
            inner_dev=True,
            say=lambda line: print(line, flush=True),
        )
        outputs.append(output)
    result = bistack.blend(outputs, work / "blend", overwrite=True)
    record = json.loads((work / "blend" / "blend.json").read_text())
    minutes = (time.perf_counter() - started) / 60
    summary = {
        "data": f"the first {args.documents} documents of CoNLL-2003 train ({sentences} sentences)",
        "folds": args.folds,
        "runs": result.runs,
        "weights": result.weights,
        "nested_f1": result.nested,
        "in_sample_f1": result.in_sample,
        "nested_weights": record["nested_weights"],
        "verdict": result.verdict,
        "minutes": minutes,
        "command": " ".join(["benchmarks/blend_conll03.py", *sys.argv[1:]]),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "blend-conll03.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "# Taggers blend: two tagger CVs of a CoNLL-2003 cut",
        "",
        f"{summary['data']}, {args.folds} folds (the same for both runs), each fold stopping "
        "on a dev split of its training folds; blended by the runs' out-of-fold token "
        "marginals, the weights the grid point (step 0.1) with the best out-of-fold entity F1.",
        "",
        "| run | CV entity F1 | weight |",
        "|---|---|---|",
        *(f"| {n} | {f1:.2f} | {result.weights[n]:.1f} |" for n, f1 in result.runs.items()),
        f"| **blend (nested)** | **{result.nested:.2f}** | |",
        f"| blend (in-sample, optimistic) | {result.in_sample:.2f} | |",
        "",
        f"Verdict: {result.verdict['says']}.",
        "",
        f"Each fold's nested weights: {json.dumps(record['nested_weights'])}.",
        "",
        f"`OMP_NUM_THREADS={args.threads} .venv/bin/python {summary['command']}` "
        f"({minutes:.0f} minutes on this machine's CPUs).",
    ]
    (RESULTS / "blend-conll03.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
