"""Where a lone sentence's time goes in PyTorch eager prediction (the row spaCy leads).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/batch1_profile.py MODEL_DIR

``Tagger.tag_tokens([tokens])`` (tags only, as ``benchmarks/spacy_peer.py`` measures it) on
CoNLL-2003 dev sentences one at a time, one thread. First the plain median latency, then the
same calls under cProfile, cut into the stages of a prediction by the cumulative time of the
function that does each; what is left of a stage once its torch kernels are taken out is Python
around small kernels. Profiling slows Python more than kernels, so the shares, not the
milliseconds, are the point. Writes benchmarks/results/batch1-profile.md.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

from bistack.data.conll import read_conll
from bistack.tasks import open_model

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "conll2003" / "dev.txt"
RESULTS = ROOT / "benchmarks" / "results"
SENTENCES = 400

KERNELS = ("torch.lstm", "torch._C._nn.linear", "torch.embedding")


def main(model_dir: str) -> None:
    torch.set_num_threads(1)
    tagger = open_model(model_dir, threads=1).model
    sentences = [s.tokens for s in read_conll(DEV, 0, 3)][: SENTENCES + 100]
    for tokens in sentences[:100]:  # warm
        tagger.tag_tokens([tokens])
    timed = sentences[100:]
    latencies = []
    for tokens in timed:
        started = time.perf_counter()
        tagger.tag_tokens([tokens])
        latencies.append(time.perf_counter() - started)
    words = sum(len(tokens) for tokens in timed)
    profiler = cProfile.Profile()
    profiler.enable()
    for tokens in timed:
        tagger.tag_tokens([tokens])
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}

    def cumulative(file: str, name: str) -> float:
        return max(
            (ct for (path, _, func), (_, _, _, ct, _) in stats.items()
             if path.endswith(file) and func == name), default=0.0,
        )  # fmt: skip

    def kernel(name: str) -> float:
        return sum(tt for (_, _, func), (_, _, tt, _, _) in stats.items() if name in func)

    whole = cumulative("tagging.py", "tag_tokens")
    lines = [
        "# Where a lone sentence's time goes (PyTorch eager, one thread)",
        "",
        f"Model: `{model_dir}`. {len(timed)} CoNLL-2003 dev sentences, one per call of "
        "`Tagger.tag_tokens` (tags only, as `benchmarks/spacy_peer.py` measures it).",
        "",
        f"Median latency {statistics.median(latencies) * 1000:.2f} ms, "
        f"{words / sum(latencies):,.0f} words/s (no profiler).",
        "",
        "Under cProfile (which slows Python more than kernels: read the shares):",
        "",
        "| stage | share of the call |",
        "|---|---:|",
    ]
    collate = cumulative("batching.py", "collate_tagging")
    embeddings = cumulative("embeddings.py", "forward")  # word lookup, casing, the char BiLSTM
    states = cumulative("network.py", "states")  # embeddings, then the word BiLSTM
    stages = (
        ("batching the tokens (word, char and casing ids, lengths)", collate),
        ("embeddings: word and casing lookups, the char BiLSTM", embeddings),
        ("the word BiLSTM (both directions, reversal within lengths)", states - embeddings),
        ("the rest: emission layer, CRF constraints, Viterbi, tags as strings",
         whole - collate - states),
    )  # fmt: skip
    for stage, seconds in stages:
        lines.append(f"| {stage} | {seconds / whole:.0%} |")
    kernel_header = "| torch kernel (self time; char and word encoders) | share of the call |"
    lines += ["", kernel_header, "|---|---:|"]
    kernels = 0.0
    for name in KERNELS:
        seconds = kernel(name)
        kernels += seconds
        lines.append(f"| `{name}` | {seconds / whole:.0%} |")
    lines += [
        f"| all three | {kernels / whole:.0%} |",
        "",
        f"Reproduce: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/batch1_profile.py "
        f"{model_dir}`.",
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batch1-profile.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
