"""The spaCy side of the spaCy comparison: tag pre-tokenised sentences with a trained pipeline,
and time it. Runs in the peer environment (``.venv-peers``), importing nothing from bistack.

    .venv-peers/bin/python benchmarks/peers/spacy_predict.py MODEL SENTENCES.json [--threads N]

SENTENCES.json: a list of token lists. Prints one JSON object: BIO tags per sentence, words/s at
``nlp.pipe`` batch sizes 1, 32 and 1,000, single-sentence latency p50/p99 (ms), peak RSS (MB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("sentences")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import spacy
    from spacy.tokens import Doc

    nlp = spacy.load(args.model)
    with open(args.sentences, encoding="utf-8") as handle:
        sentences = json.load(handle)
    words = sum(len(s) for s in sentences)

    def docs():  # pre-tokenised: the tokens every tagger in the comparison gets
        return (Doc(nlp.vocab, words=tokens) for tokens in sentences)

    tagged = []
    for doc in nlp.pipe(docs(), batch_size=1000):
        tagged.append([f"{t.ent_iob_}-{t.ent_type_}" if t.ent_iob_ != "O" else "O" for t in doc])
    speeds = {}
    for batch_size in (1, 32, 1000):
        start = time.perf_counter()
        for _ in nlp.pipe(docs(), batch_size=batch_size):
            pass
        speeds[str(batch_size)] = words / (time.perf_counter() - start)
    latencies = []
    for tokens in sentences[:500]:
        start = time.perf_counter()
        nlp(Doc(nlp.vocab, words=tokens))
        latencies.append(1000 * (time.perf_counter() - start))
    latencies.sort()
    result = {
        "tags": tagged,
        "words_per_s": speeds,
        "latency_ms": {
            "p50": statistics.median(latencies),
            "p99": latencies[int(0.99 * (len(latencies) - 1))],
        },
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
