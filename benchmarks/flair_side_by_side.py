"""bistack's stacked tagger over all-mpnet-base-v2 beside the same model in Flair 0.15.1, on one
CoNLL-2003 cut (the first 2,000 training sentences and the first 1,000 of dev, whole
documents), in one run:
dev entity F1 (each epoch's and the best's) and the time to train, the encoder's pass included
(a fresh feature cache for bistack; Flair's side embeds every sentence once and keeps the
vectors). Flair trains twice over those vectors: with bistack's optimizer (Adam 0.002) and with
its own tagger recipe (SGD 0.1, annealed). Both sides run at the same threads, one after the
other. The table lists every setting each side has.

    make .venv-peers/.installed backbones
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/flair_side_by_side.py [--epochs 15]

Writes benchmarks/results/base-size/flair-side-by-side.{md,json}.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import bistack
from precision_dev import best_dev, conll_cut

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results" / "base-size"
WORK = ROOT / "runs" / "benchmarks" / "flair-side-by-side"
RECIPE = "configs/conll03-stacked-mpnet-crf.yaml"
BACKBONE = "sentence-transformers/all-mpnet-base-v2"
PEERS = ROOT / ".venv-peers" / "bin" / "python"


def bistack_side(cut: Path, dev: Path, epochs: int) -> dict:
    output = WORK / "bistack"
    with tempfile.TemporaryDirectory(dir=ROOT / "runs") as cache:
        settings = {
            "data.train": str(cut),
            "data.dev": str(dev),
            "train.max_epochs": epochs,
            "train.patience": epochs,
            "backbone.cache_dir": cache,
        }
        start = time.perf_counter()
        bistack.train(ROOT / RECIPE, output, settings, overwrite=True)
        seconds = time.perf_counter() - start
    with (output / "metrics.csv").open(encoding="utf-8") as log:
        epochs = [round(float(row["dev_f1"]), 2) for row in csv.DictReader(log)]
    return {
        "dev_f1": best_dev(output, "dev_f1", lower=False),
        "dev_f1_by_epoch": epochs,
        "train_seconds": round(seconds, 1),
    }


def flair_side(cut: Path, dev: Path, epochs: int, threads: int) -> dict:
    out = WORK / "flair.json"
    command = [
        str(PEERS), str(ROOT / "benchmarks" / "peers" / "flair_layers.py"),
        "--train", str(cut), "--dev", str(dev),
        "--backbone", BACKBONE, "--epochs", str(epochs), "--batch-size", "32",
        "--recipes", "adam:0.002", "sgd:0.1", "--hidden", "200",
        "--threads", str(threads), "--output", str(out),
    ]  # fmt: skip
    subprocess.run(command, check=True, env=os.environ | {"HF_HUB_OFFLINE": "1"})
    return json.loads(out.read_text(encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--sentences", type=int, default=2000, help="from train")
    parser.add_argument("--dev-sentences", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not (DATA / "conll2003").is_dir():
        print(f"skipped: {DATA} lacks CoNLL-2003 (the shared data)")
        return 0
    if not PEERS.exists():
        print("the peers' environment is missing: make .venv-peers/.installed", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    WORK.mkdir(parents=True, exist_ok=True)
    cut, dev = conll_cut(args.sentences), conll_cut(args.dev_sentences, "dev")
    ours = bistack_side(cut, dev, args.epochs)
    theirs = flair_side(cut, dev, args.epochs, args.threads)
    adam, sgd = theirs["runs"]
    settings = [
        ("encoder", f"{BACKBONE}, frozen, last 4 layers concatenated, subword mean", "the same"),
        ("document context", "64 subwords a side (`backbone.context`)",
         "64 words a side (`use_context`), the `[FLERT]` separator (Flair's default)"),
        ("encoder pass", "once, before training (the feature cache), in evaluation mode",
         "once, before training, in evaluation mode (Flair's own flow: in the first epoch, "
         "in training mode)"),
        ("encoder precision", "bf16-mixed (the recipe's)", "float32 (Flair has no other)"),
        ("other features", "words 100 (trained), characters BiLSTM 25/25, casing 10",
         "words 100 (OneHotEmbeddings), characters BiLSTM 25/25; no casing"),
        ("BiLSTM", "1 layer, 200 a direction", "1 layer, 200 a direction, no reprojection"),
        ("dropout", "0.5 outer, unknown-word replacement 0.5 of singletons",
         "locked dropout 0.5, word dropout 0"),
        ("CRF", "BIOES, constrained; document consistency 0.7 at decoding", "BIOES"),
        ("optimizer", "Adam 0.002, decay 0.05 an epoch, clip 5",
         "Adam 0.002, clip 5, no anneal; or SGD 0.1, clip 5, halved after 3 flat epochs"),
        ("batch size, epochs", f"32, {args.epochs} (best dev kept)",
         f"32, {args.epochs} (best dev kept)"),
        ("threads", str(args.threads), str(theirs["threads"])),
    ]  # fmt: skip
    flair_rows = [
        (f"Flair 0.15.1, {run['optimizer']} {run['learning_rate']:g}", run) for run in (adam, sgd)
    ]
    summary = {
        "sentences": theirs["sentences"],
        "dev_sentences": args.dev_sentences,
        "epochs": args.epochs,
        "bistack": ours,
        "flair": theirs,
        "speed_ratio": round(
            (theirs["encoder_seconds"] + adam["train_seconds"]) / ours["train_seconds"], 2
        ),
        "settings": [dict(zip(("setting", "bistack", "flair"), r, strict=True)) for r in settings],
    }
    epochs = " | ".join(str(epoch) for epoch in range(1, args.epochs + 1))
    lines = [
        "# bistack beside Flair at base size (all-mpnet-base-v2, CoNLL-2003 cut)",
        "",
        f"Both trained on the first {theirs['sentences']:,} sentences of CoNLL-2003 train, scored "
        f"on the first {args.dev_sentences:,} of dev (whole documents; entity F1), one after "
        "the other in one run "
        f"(`OMP_NUM_THREADS={args.threads} .venv/bin/python benchmarks/flair_side_by_side.py "
        f"--epochs {args.epochs} --threads {args.threads}`). The time is "
        "the whole training, the encoder's pass included (a fresh feature cache for bistack; "
        f"Flair's side embeds every sentence once, {theirs['encoder_seconds']:.0f} s, and both "
        "of its recipes train over those vectors).",
        "",
        "| | dev F1 (best epoch) | training time (s) |",
        "|---|---|---|",
        f"| bistack | {ours['dev_f1']:.2f} | {ours['train_seconds']:.0f} |",
        *(
            f"| {name} | {run['dev_f1']:.2f} | "
            f"{theirs['encoder_seconds'] + run['train_seconds']:.0f} |"
            for name, run in flair_rows
        ),
        "",
        f"bistack trains in {1 / summary['speed_ratio']:.2f}x the time of Flair with the same "
        "optimizer.",
        "",
        "Dev F1 after each epoch:",
        "",
        f"| | {epochs} |",
        "|---|" + "---|" * args.epochs,
        "| bistack | " + " | ".join(f"{v:.2f}" for v in ours["dev_f1_by_epoch"]) + " |",
        *(
            f"| {name} | " + " | ".join(f"{v:.2f}" for v in run["dev_f1_by_epoch"]) + " |"
            for name, run in flair_rows
        ),
        "",
        "| setting | bistack | Flair |",
        "|---|---|---|",
        *(f"| {name} | {a} | {b} |" for name, a, b in settings),
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "flair-side-by-side.md").write_text("\n".join(lines), encoding="utf-8")
    (RESULTS / "flair-side-by-side.json").write_text(
        json.dumps(summary, indent=1) + "\n", encoding="utf-8"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
