"""Speed of the recurrent core, as ratios against references measured in the same run.

- RecurrentEncoder forward+backward against a bare nn.LSTM on the same padded batch (the bare
  LSTM reads padding and skips packing, so it is the floor, not an equal).
- CRF nll forward+backward and Viterbi decode against pytorch-crf.

Run:  .venv/bin/python benchmarks/core_speed.py [--threads N] [--repeats R]
Writes benchmarks/results/core_speed.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
import torchcrf
from torch import nn

from bistack.crf import CRF
from bistack.encoders import RecurrentEncoder

RESULTS = Path(__file__).parent / "results"


def median_seconds(function, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved(ours, theirs, repeats: int) -> tuple[float, float]:
    """Medians of alternating runs, so drifting machine load hits both alike."""
    a, b = [], []
    for _ in range(repeats):
        a.append(median_seconds(ours, 1, warmup=0))
        b.append(median_seconds(theirs, 1, warmup=0))
    ours(), theirs()
    return statistics.median(a), statistics.median(b)


def encoder_rows(repeats: int) -> list[dict]:
    rows = []
    torch.manual_seed(0)
    for batch_size, seq_len, input_size, hidden in [(32, 40, 150, 200), (32, 128, 150, 200)]:
        inputs = torch.randn(batch_size, seq_len, input_size)
        lengths = torch.randint(seq_len // 2, seq_len + 1, (batch_size,))
        lengths[0] = seq_len
        encoder = RecurrentEncoder(input_size, hidden, bidirectional=True)
        bare = nn.LSTM(input_size, hidden, batch_first=True, bidirectional=True)

        def ours():
            out = encoder(inputs, lengths=lengths)
            (out.states.sum() + out.summary.sum()).backward()

        def theirs():
            out, _ = bare(inputs)
            out.sum().backward()

        ours_s, bare_s = interleaved(ours, theirs, repeats)
        rows.append(
            {
                "what": f"BiLSTM {hidden} fwd+bwd, batch {batch_size}, len {seq_len}",
                "bistack_ms": 1000 * ours_s,
                "reference": "bare nn.LSTM (unpacked)",
                "reference_ms": 1000 * bare_s,
                "ratio": ours_s / bare_s,
            }
        )
    return rows


def crf_rows(repeats: int) -> list[dict]:
    rows = []
    for seq_len in (40, 128):
        for num_tags in (9, 17):
            torch.manual_seed(0)
            batch_size = 32
            emissions = torch.randn(batch_size, seq_len, num_tags, requires_grad=True)
            tags = torch.randint(num_tags, (batch_size, seq_len))
            lengths = torch.randint(seq_len // 2, seq_len + 1, (batch_size,))
            lengths[0] = seq_len
            mask = torch.arange(seq_len) < lengths.unsqueeze(1)
            ours, theirs = CRF(num_tags), torchcrf.CRF(num_tags, batch_first=True)
            theirs.load_state_dict(
                {k: v for k, v in ours.state_dict().items() if not k.endswith("_ok")}
            )

            def our_nll():
                ours.nll(emissions, tags, mask, reduction="sum").backward()

            def their_nll():
                (-theirs(emissions, tags, mask, reduction="sum")).backward()

            nll_ours, nll_theirs = interleaved(our_nll, their_nll, repeats)
            with torch.inference_mode():
                dec_ours, dec_theirs = interleaved(
                    lambda: ours.decode(emissions, mask),
                    lambda: theirs.decode(emissions, mask),
                    repeats,
                )
            shape = f"batch {batch_size}, len {seq_len}, {num_tags} tags"
            rows.append(
                {
                    "what": f"CRF nll fwd+bwd, {shape}",
                    "bistack_ms": 1000 * nll_ours,
                    "reference": "pytorch-crf 0.7.2",
                    "reference_ms": 1000 * nll_theirs,
                    "ratio": nll_ours / nll_theirs,
                }
            )
            rows.append(
                {
                    "what": f"CRF Viterbi decode, {shape}",
                    "bistack_ms": 1000 * dec_ours,
                    "reference": "pytorch-crf 0.7.2",
                    "reference_ms": 1000 * dec_theirs,
                    "ratio": dec_ours / dec_theirs,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = encoder_rows(args.repeats) + crf_rows(args.repeats)
    machine = (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch "
        f"threads, torch {torch.__version__}, Python {platform.python_version()}"
    )
    lines = [
        "# Core speed: bistack against references, same process, same batch",
        "",
        f"Machine: {machine}. Medians of {args.repeats} interleaved runs.",
        f"Command: `.venv/bin/python benchmarks/core_speed.py --threads {args.threads} "
        f"--repeats {args.repeats}`",
        "",
        "ratio = bistack time / reference time (below 1: bistack is faster).",
        "",
        "| what | bistack ms | reference | reference ms | ratio |",
        "|---|---:|---|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['what']} | {row['bistack_ms']:.2f} | {row['reference']} | "
            f"{row['reference_ms']:.2f} | {row['ratio']:.2f} |"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "core_speed.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "core_speed.json").write_text(
        json.dumps({"machine": machine, "rows": rows}, indent=2)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
