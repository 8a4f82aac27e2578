"""A fine-tuned backbone's step when the pooler reads CLS only, against the step that also
stacks and averages every layer's token states (what a CLS-reading model computed before).

Times the backbone's forward and backward at one batch shape, both ways alternately after a
warm-up: ``TransformerBackbone.forward`` (CLS and mean vectors, the CLS ones used) against
``TransformerBackbone.features(batch, "cls")``. Median and spread of ``--repeats`` runs each.

Run:  .venv/bin/python benchmarks/cls_only_features.py --batch 16 --length 256 --repeats 5
Writes benchmarks/results/cls-only-features.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from bistack.models.backbone import TransformerBackbone

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="default")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=256, help="subwords per text")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    backbone = TransformerBackbone.load(args.backbone).train()
    batch = backbone.tokenize(
        [" ".join(["word"] * args.length)] * args.batch, "truncate", max_length=args.length
    )
    steps = {
        "both kinds, CLS read": lambda: backbone(batch).cls.sum().backward(),
        "CLS only": lambda: backbone.features(batch, "cls").sum().backward(),
    }
    times: dict[str, list[float]] = {name: [] for name in steps}
    for step in steps.values():
        step()  # warm-up
    for _ in range(args.repeats):
        for name, step in steps.items():
            started = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - started)
    rows = {
        name: {"median": statistics.median(v), "min": min(v), "max": max(v)}
        for name, v in times.items()
    }
    ratio = rows["CLS only"]["median"] / rows["both kinds, CLS read"]["median"]
    shape = f"{args.batch} texts x {args.length} subwords, {args.threads} threads"
    lines = [
        "# A fine-tuned backbone's step, CLS only against both kinds of layer vectors",
        "",
        f"`{args.backbone}` backbone, forward + backward, {shape}, "
        f"{args.repeats} alternating runs each after a warm-up.",
        "",
        "| step | median s | min | max |",
        "|---|---:|---:|---:|",
        *(
            f"| {name} | {r['median']:.3f} | {r['min']:.3f} | {r['max']:.3f} |"
            for name, r in rows.items()
        ),
        "",
        f"CLS only takes **{ratio:.2f}x** the time of computing both kinds.",
        "",
        "Reproduce: `.venv/bin/python benchmarks/cls_only_features.py "
        f"--batch {args.batch} --length {args.length} --repeats {args.repeats} "
        f"--threads {args.threads}`",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cls-only-features.md").write_text("\n".join(lines) + "\n")
    record = {"args": vars(args), "rows": rows, "ratio": ratio}
    (RESULTS / "cls-only-features.json").write_text(json.dumps(record, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
