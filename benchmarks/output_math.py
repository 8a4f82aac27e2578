"""How fast is the tagger's output math (tags, token marginals, entity confidences, k best)
now that it is numpy over the emissions, shared with the exported runtime? Times
``Tagger.analyse_tokens`` (confidences, top 1 and top 3) and ``tag_tokens`` (tags alone) on
every CoNLL-2003 dev sentence, best of 3, one thread.

Run it on this code and on the code before the change (torch over the CRF), same model, same
process settings, and compare the two JSON lines it prints:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/output_math.py runs/conll03-confidence/model
    git worktree add /tmp/before 3e9def0
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/before/src .venv/bin/python benchmarks/output_math.py \\
        runs/conll03-confidence/model

Results: benchmarks/results/output-math.md.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

import bistack
from bistack.data.conll import read_conll
from bistack.predictor import load_model

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "conll2003" / "dev.txt"


def best_of(runs: int, function, *args, **kwargs) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return min(times)


def main(model_dir: str) -> None:
    torch.set_num_threads(1)
    tagger = load_model(model_dir)
    tokens = [s.tokens for s in read_conll(DEV, 0, -1)]
    tagger.analyse_tokens(tokens[:64])  # compile the kernels outside the timing
    row = {
        "code": str(Path(bistack.__file__).parent),
        "sentences": len(tokens),
        "tags_only_s": best_of(3, tagger.tag_tokens, tokens),
        "confidences_s": best_of(3, tagger.analyse_tokens, tokens),
        "confidences_top3_s": best_of(3, tagger.analyse_tokens, tokens, top_k=3),
    }
    print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv[1])
