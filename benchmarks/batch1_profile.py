"""Where a lone sentence's time goes in PyTorch eager prediction.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/batch1_profile.py MODEL_DIR

``Tagger.tag_tokens([tokens])`` (tags only, as ``benchmarks/spacy_peer.py`` measures it) on
CoNLL-2003 dev sentences one at a time, one thread. First the plain median latency, then the
same calls under cProfile, cut into the stages of a prediction by the cumulative time of the
function that does each; what is left of a stage once its torch kernels are taken out is Python
around small kernels. Profiling slows Python more than kernels, so the shares, not the
milliseconds, are the point. Both with the character encodings of the sentences' words kept
from a first pass, and with that cache off. Writes benchmarks/results/batch1-profile.md.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from bistack.data.conll import read_conll
from bistack.models.spelling_cache import each_batch_alone
from bistack.predictor import open_model

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "conll2003" / "dev.txt"
RESULTS = ROOT / "benchmarks" / "results"
SENTENCES = 400
ROUNDS = 5

KERNELS = ("torch.lstm", "torch._C._nn.linear", "torch.embedding")


def profiled(tagger, timed: list[list[str]]) -> dict:
    """cProfile's table of ``tag_tokens`` on ``timed`` one at a time:
    {(file, line, name): (cc, nc, tt, ct, callers)}."""
    profiler = cProfile.Profile()
    profiler.enable()
    for tokens in timed:
        tagger.tag_tokens([tokens])
    profiler.disable()
    return pstats.Stats(profiler).stats


def shares(stats: dict) -> list[str]:
    """The table rows: each stage's and each kernel's share of the call."""

    def cumulative(file: str, name: str) -> float:
        return max(
            (ct for (path, _, func), (_, _, _, ct, _) in stats.items()
             if path.endswith(file) and func == name), default=0.0,
        )  # fmt: skip

    def kernel(name: str) -> float:
        return sum(tt for (_, _, func), (_, _, tt, _, _) in stats.items() if name in func)

    whole = cumulative("tagging.py", "tag_tokens")
    collate = cumulative("batching.py", "collate_tagging")
    embeddings = cumulative("embeddings.py", "forward")  # word lookup, casing, the char BiLSTM
    states = cumulative("network.py", "states")  # embeddings, then the word BiLSTM
    stages = (
        ("batching the tokens (word, char and casing ids, lengths)", collate),
        ("embeddings: word and casing lookups, the char BiLSTM (or the cache)", embeddings),
        ("the word BiLSTM (both directions, reversal within lengths)", states - embeddings),
        ("the rest: emission layer, CRF constraints, Viterbi, tags as strings",
         whole - collate - states),
    )  # fmt: skip
    lines = ["| stage | share of the call |", "|---|---:|"]
    lines += [f"| {stage} | {seconds / whole:.0%} |" for stage, seconds in stages]
    lines += ["", "| torch kernel (self time; char and word encoders) | share of the call |"]
    lines.append("|---|---:|")
    kernels = 0.0
    for name in KERNELS:
        kernels += kernel(name)
        lines.append(f"| `{name}` | {kernel(name) / whole:.0%} |")
    return [*lines, f"| all three | {kernels / whole:.0%} |"]


def latencies(tagger, timed: list[list[str]]) -> tuple[float, float]:
    """Median latency (ms) and words/s of ``tag_tokens`` on ``timed`` one at a time."""
    each = []
    for tokens in timed:
        started = time.perf_counter()
        tagger.tag_tokens([tokens])
        each.append(time.perf_counter() - started)
    return statistics.median(each) * 1000, sum(len(t) for t in timed) / sum(each)


def main(model_dir: str) -> None:
    torch.set_num_threads(1)
    timed = [s.tokens for s in read_conll(DEV, 0, 3)][:SENTENCES]
    tagger = open_model(model_dir, threads=1).model
    latencies(tagger, timed)  # warm: kernels for these lengths, and the words' encodings
    # each_batch_alone: the cache of words' character encodings off, as for words never seen
    states = {"words seen": nullcontext, "words unseen": each_batch_alone}
    rounds = []
    for _ in range(ROUNDS):  # in turn: the shared cores' speed drifts
        each = {}
        for state, scope in states.items():
            with scope():
                each[state] = latencies(tagger, timed)
        rounds.append(each)
    measured = {
        state: tuple(statistics.median(r[state][i] for r in rounds) for i in (0, 1))
        for state in states
    }
    tables = {}
    for state, scope in states.items():
        with scope():
            tables[state] = shares(profiled(tagger, timed))
    lines = [
        "# Where a lone sentence's time goes (PyTorch eager, one thread)",
        "",
        f"Model: `{model_dir}`. {len(timed)} CoNLL-2003 dev sentences, one per call of "
        "`Tagger.tag_tokens` (tags only, as `benchmarks/spacy_peer.py` measures it), after "
        "one pass over them: with the words' character encodings the tagger keeps (words "
        "seen), and with that cache off (`each_batch_alone`: as for words never seen).",
        "",
        f"Medians of {ROUNDS} rounds, the two in turn:",
        "",
        "| sentences | median latency | words/s |",
        "|---|---:|---:|",
        *(f"| {state} | {ms:.2f} ms | {speed:,.0f} |" for state, (ms, speed) in measured.items()),
        "",
        "Under cProfile (which slows Python more than kernels: read the shares):",
    ]
    for state, table in tables.items():
        lines += ["", f"### {state.capitalize()}", "", *table]
    lines += [
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
