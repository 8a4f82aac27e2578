"""Does the frozen pass in bfloat16 cost dev score? The same recipe trained with
``backbone.precision: 32`` and ``bf16-mixed`` (nothing else changed), three seeds each, for a
regressor (CommonLit, the MiniLM layer regressor: dev is its recipe's split of train) and a
tagger (the MiniLM layer tagger with a CRF, trained on a CoNLL-2003 cut, scored on the whole
dev file): each precision's dev mean and spread, and whether bf16's mean lies inside float32's
three-seed range. The CPU's bf16 flags are recorded. A finished run is reused.

Run:  OMP_NUM_THREADS=2 .venv/bin/python benchmarks/precision_dev.py
Writes benchmarks/results/precision-dev.{md,json}.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

import torch

import bistack

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
WORK = ROOT / "runs" / "benchmarks" / "precision-dev"
PRECISIONS = ("32", "bf16-mixed")
SEEDS = (1, 2, 3)


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return sorted({f for f in ("avx512_bf16", "amx_bf16", "avx512f") if f in text.split()})


def conll_cut(sentences: int, split: str = "train") -> Path:
    """The first ``sentences`` sentences of CoNLL-2003 ``split``, whole documents kept."""
    target = WORK / f"conll03-{split}-{sentences}.txt"
    if not target.exists():
        blocks = (DATA / "conll2003" / f"{split}.txt").read_text(encoding="utf-8").split("\n\n")
        kept, count = [], 0
        for block in blocks:
            if count >= sentences and block.startswith("-DOCSTART-"):
                break
            kept.append(block)
            count += 0 if block.startswith("-DOCSTART-") or not block.strip() else 1
        WORK.mkdir(parents=True, exist_ok=True)
        target.write_text("\n\n".join(kept) + "\n", encoding="utf-8")
    return target


def best_dev(run: Path, column: str, lower: bool) -> float:
    """The best dev score a finished run kept (its metrics.csv)."""
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    values = [float(row[column]) for row in rows]
    return min(values) if lower else max(values)


def trained(config: str, name: str, precision: str, seed: int, overrides: dict) -> Path:
    output = WORK / name / f"{precision}-seed{seed}"
    if (output / "model" / "README.md").exists():
        return output
    settings = overrides | {"backbone.precision": precision, "train.seed": seed}
    bistack.train(ROOT / "configs" / config, output, settings, overwrite=True)
    return output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=2000, help="the CoNLL cut's size")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--cases", default="regressor,tagger", help="which of regressor, tagger to run"
    )
    args = parser.parse_args()
    if not (DATA / "conll2003").is_dir() or not (DATA / "commonlit").is_dir():
        print(f"skipped: {DATA} lacks CoNLL-2003 or CommonLit (the shared data)")
        return 0
    torch.set_num_threads(args.threads)
    every: dict[str, tuple[str, dict[str, str] | None, str, bool]] = {
        "regressor": ("commonlit-minilm-layers.yaml", {}, "dev_rmse", True),
        "tagger": ("conll03-minilm-layers-crf.yaml", None, "dev_f1", False),
    }
    cases = {}
    for name in args.cases.split(","):
        config, overrides, column, lower = every[name]
        if overrides is None:  # the tagger: trained on a cut of train, scored on all of dev
            overrides = {"data.train": str(conll_cut(args.sentences))}
        cases[name] = (config, overrides, column, lower)
    table: dict[str, dict[str, list[float]]] = {}
    for name, (config, overrides, column, lower) in cases.items():
        table[name] = {}
        for precision in PRECISIONS:
            scores = [
                best_dev(trained(config, name, precision, seed, overrides), column, lower)
                for seed in SEEDS
            ]
            table[name][precision] = scores
    flags = cpu_flags()
    results: dict[str, dict[str, object]] = {}
    summary = {"cpu_flags": flags, "seeds": list(SEEDS), "results": results}
    lines = [
        "# Dev scores with the frozen pass in float32 and in bfloat16",
        "",
        "The same recipe, only `backbone.precision` changed, three seeds each (train.seed 1-3). "
        f"CPU flags: {', '.join(flags) or 'none of avx512_bf16, amx_bf16'}.",
        "",
        "| model | metric | float32 (seeds) | bf16-mixed (seeds) "
        "| bf16 mean inside float32's range |",
        "|---|---|---|---|---|",
    ]
    for name, (config, _, column, _) in cases.items():
        full, half = table[name]["32"], table[name]["bf16-mixed"]
        inside = min(full) <= statistics.fmean(half) <= max(full)
        results[name] = {
            "config": config,
            "metric": column,
            "32": full,
            "bf16-mixed": half,
            "inside": inside,
        }
        digits = 4 if column == "dev_rmse" else 2

        def shown(scores: list[float], digits: int = digits) -> str:
            each = ", ".join(f"{s:.{digits}f}" for s in scores)
            mean, spread = statistics.fmean(scores), statistics.stdev(scores)
            return f"{mean:.{digits}f} ± {spread:.{digits}f} ({each})"

        lines.append(
            f"| {name} ({config}) | {column} | {shown(full)} | {shown(half)} | "
            f"{'yes' if inside else 'no'} |"
        )
    said = {
        "tagger": f"The tagger trained on the first {args.sentences} sentences of CoNLL-2003 "
        "train (whole documents), scored on all of dev.",
        "regressor": "The regressor trained on CommonLit's train less its recipe's dev split "
        "(15%, data.split_seed 0), scored on that split.",
    }
    lines += [
        "",
        *(said[name] for name in cases),
        "",
        f"`OMP_NUM_THREADS={args.threads} .venv/bin/python benchmarks/precision_dev.py "
        f"--cases {args.cases}`",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "precision-dev.json").write_text(json.dumps(summary, indent=2) + "\n")
    (RESULTS / "precision-dev.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
