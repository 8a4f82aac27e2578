"""The frozen backbone's pass in bfloat16 (``backbone.precision: bf16-mixed``) against float32,
on all-MiniLM-L6-v2 and all-mpnet-base-v2 (``make backbones``): the same CoNLL-2003 dev
sentences, the two precisions timed in turn (A B A B ... after a warm-up each, so that a drift
of the shared machine falls on both), at one thread; and how close bfloat16's states are to
float32's (cosine of each word's vector in the last four layers, as the stacked tagger reads
them). The CPU's bf16 flags are recorded: without ``avx512_bf16`` or ``amx_bf16`` bfloat16 runs
emulated, slower.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/frozen_precision.py [--texts 32] [--rounds 3]

Writes benchmarks/results/frozen-precision.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from bistack.data.conll import read_conll
from bistack.models.backbone import TransformerBackbone
from bistack.models.frozen_pass import FrozenPass

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "conll2003" / "dev.txt"
ENCODERS = {
    "all-MiniLM-L6-v2": "default",
    "all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2",
}


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])  # fmt: skip
    return sorted(f for f in flags if f in ("avx512_bf16", "amx_bf16", "amx_tile", "avx512f"))


def last_layers(
    backbone: TransformerBackbone, input_ids: torch.Tensor, mask: torch.Tensor, precision: str
) -> torch.Tensor:
    """The last four layers' states of every real subword, ``(subwords, 4, hidden)``, from
    the frozen pass at ``precision`` ("32" or "bf16-mixed") over ``(rows, seq)`` ids."""
    with torch.inference_mode():
        hidden = backbone.hidden_states(input_ids, mask, FrozenPass(precision))
    return torch.stack(hidden[-4:], dim=2)[mask.bool()]


def states(backbone: TransformerBackbone, texts: list[str], precision: str) -> torch.Tensor:
    """:func:`last_layers` of ``texts``, tokenized as the pass tokenizes them."""
    batch = backbone.tokenize(texts, "truncate")
    return last_layers(backbone, batch.input_ids, batch.attention_mask, precision)


def measure(name: str, path: str, texts: list[str], rounds: int) -> dict:
    backbone = TransformerBackbone.load(path)
    backbone.model.eval()
    seconds: dict[str, list[float]] = {"32": [], "bf16-mixed": []}
    for precision in seconds:  # warm-up, each
        states(backbone, texts, precision)
    for _ in range(rounds):
        for precision in seconds:
            started = time.perf_counter()
            states(backbone, texts, precision)
            seconds[precision].append(time.perf_counter() - started)
    full, half = states(backbone, texts, "32"), states(backbone, texts, "bf16-mixed")
    cosine = torch.nn.functional.cosine_similarity(full, half, dim=-1)
    return {
        "encoder": name,
        "float32_s": statistics.median(seconds["32"]),
        "bf16_s": statistics.median(seconds["bf16-mixed"]),
        "speedup": statistics.median(seconds["32"]) / statistics.median(seconds["bf16-mixed"]),
        "runs_s": seconds,
        "cosine_mean": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not DEV.is_file():
        raise SystemExit(f"skipped: {DEV} is not there")
    texts = [" ".join(s.tokens) for s in read_conll(DEV)[: args.texts]]
    rows = [measure(name, path, texts, args.rounds) for name, path in ENCODERS.items()]
    flags = cpu_flags()
    record = {"threads": torch.get_num_threads(), "texts": len(texts), "cpu_flags": flags,
              "rows": rows}  # fmt: skip
    out = ROOT / "benchmarks" / "results"
    (out / "frozen-precision.json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [
        "# The frozen pass in bfloat16 against float32 (backbone.precision)",
        "",
        f"{len(texts)} CoNLL-2003 dev sentences in one batch, {record['threads']} thread(s), "
        f"{args.rounds} rounds alternating after a warm-up each, medians; CPU flags: "
        f"{', '.join(flags) or 'none of avx512_bf16, amx_bf16'}.",
        "Command: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/frozen_precision.py`.",
        "",
        "| encoder | float32 s | bf16 s | speed-up | cosine of the last 4 layers' states, mean "
        "(worst) |",
        "|---|---|---|---|---|",
        *(
            f"| {r['encoder']} | {r['float32_s']:.3f} | {r['bf16_s']:.3f} | "
            f"**{r['speedup']:.2f}x** | {r['cosine_mean']:.5f} ({r['cosine_min']:.4f}) |"
            for r in rows
        ),
        "",
    ]
    (out / "frozen-precision.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
