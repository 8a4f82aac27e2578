"""Prediction speed of stacked taggers side by side, in one process, taking turns.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/stacked_predict_speed.py \\
        [--sentences N] [--rounds R] NAME=MODEL_DIR ...

Words/s of ``predict`` on CoNLL-2003 dev sentences as raw text, at batch 1 and 32, measured
as ``benchmarks/hf_token_classification.py`` measures its rows (the best of two passes, and
the median latency of a sentence at batch 1), the models taking turns for R rounds so that a
noisy machine slows each alike; each cell is the median over the rounds, and the ratio column
is against the first model. One thread. Writes benchmarks/results/stacked-predict-speed.md.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from bistack.data.conll import read_conll
from bistack.predictor import load_model
from hf_token_classification import DATA, RESULTS, prediction_rows

KEYS = ("words_per_s_batch1", "words_per_s_batch32", "p50_ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("models", nargs="+", help="NAME=DIR: bistack taggers to compare")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N dev sentences")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not (DATA / "dev.txt").is_file():
        raise SystemExit(f"{DATA} is missing: this benchmark needs ../shared/data/conll2003")
    dev = read_conll(DATA / "dev.txt")[: args.sentences]
    texts = [" ".join(s.tokens) for s in dev]
    words = sum(len(s.tokens) for s in dev)
    models = {}
    for pair in args.models:
        name, _, directory = pair.partition("=")
        models[name] = load_model(directory)
    rounds: dict[str, list[dict]] = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            rounds[name].append(prediction_rows(name, model.predict, texts, words))
    table = {n: {k: statistics.median(r[k] for r in rs) for k in KEYS} for n, rs in rounds.items()}
    first = next(iter(table.values()))
    lines = [
        "# Stacked taggers' prediction speed, side by side",
        "",
        "Reproduce: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/stacked_predict_speed.py "
        f"--sentences {args.sentences} --rounds {args.rounds} {' '.join(args.models)}`. "
        f"The first {len(dev)} CoNLL-2003 dev sentences ({words} words) as raw text, `predict`, "
        f"one thread, the models taking turns for {args.rounds} rounds; medians over the rounds.",
        "",
        "| model | words/s, batch 1 | words/s, batch 32 | p50 latency, one sentence "
        "| batch 1 / batch 32 against the first |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in table.items():
        lines.append(
            f"| {name} | {row['words_per_s_batch1']:,.0f} | {row['words_per_s_batch32']:,.0f} | "
            f"{row['p50_ms']:.2f} ms | "
            f"{row['words_per_s_batch1'] / first['words_per_s_batch1']:.2f}x / "
            f"{row['words_per_s_batch32'] / first['words_per_s_batch32']:.2f}x |"
        )
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "stacked-predict-speed.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
