"""The host's work per sentence when a tagger predicts, with its network's pass taken away: the
emissions of every CoNLL-2003 dev sentence are computed once by the network, then served from
memory to ``tag_tokens`` (tags) and ``analyse_tokens`` (tags, token and entity confidences) at
batch 256. What is left is what a GPU cannot do for the host: encoding words to ids, collation,
decoding, the analyses. On a GPU the network's pass overlaps this work, so it bounds sentences
a second from above whatever the device.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/host_work.py [--out benchmarks/results]

Each mode is timed 5 times (best and median, microseconds a sentence), beside a fixed host
workload (``reference``: a pure-Python and numpy loop of a set size) timed in the same process,
so that a before/after comparison across processes (``git worktree`` of the earlier commit, its
``src`` first on ``PYTHONPATH``) reads ratios to the reference, not the shared CPU's mood. The
tagger is the CoNLL-2003 recipe trained for 4 epochs on 4,000 training sentences, kept under
``runs/benchmarks/host-work-tagger`` (made once). Also: CPU tags a second at batch 256 with the
network (``tag_tokens`` whole), and batch-1 latency, with the network and without (the host's
fixed cost of a call).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "conll2003"
MODEL = ROOT / "runs" / "benchmarks" / "host-work-tagger"
REPEATS = 5


def reference() -> None:
    """A fixed host workload: Python loops over lists and small numpy calls."""
    rows = [list(range(i % 40 + 1)) for i in range(20_000)]
    total = 0
    for row in rows:
        total += sum(x * 3 for x in row)
        np.asarray(row, dtype=np.int64).sum()


def timed(work: Callable[[], object], repeats: int = REPEATS) -> list[float]:
    work()  # first calls
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        runs.append(time.perf_counter() - start)
    return runs


def trained_tagger(folder: Path) -> Path:
    """The recipe's tagger after 4 epochs on 4,000 training sentences (made once, in
    ``folder``)."""
    from bistack.data.conll import read_conll, write_conll
    from bistack.tasks import config_from_dict, read_config_file
    from bistack.training import train_config

    model = folder / "model"
    if (model / "config.json").is_file():
        return model
    folder.mkdir(parents=True, exist_ok=True)
    train = folder / "train.txt"
    chosen = read_conll(DATA / "train.txt")[:4000]
    train.write_text(write_conll(chosen, [s.tags for s in chosen]))
    data = read_config_file(ROOT / "configs" / "conll03-bilstm-crf.yaml")
    data["data"] |= {"train": str(train), "dev": str(DATA / "dev.txt")}
    data["train"] |= {"max_epochs": 4}
    trained = train_config(config_from_dict(data), folder / "run")
    Path(trained.model_dir).rename(model)
    return model


def single_latencies(tagger, sentences: list[list[str]]) -> list[float]:
    """Seconds of each sentence's ``tag_tokens`` alone (batch 1)."""
    latencies = []
    for sentence in sentences:
        start = time.perf_counter()
        tagger.tag_tokens([sentence], batch_size=1)
        latencies.append(time.perf_counter() - start)
    return latencies


def without_network(tagger) -> None:
    """The tagger's network answers from memory: each batch's emissions recorded once, by
    its word ids, then served."""
    network = tagger.model
    real = network.emissions
    kept: dict[tuple, torch.Tensor] = {}

    def key(batch) -> tuple:
        return (tuple(batch.words.shape), batch.words.numpy().tobytes())

    def served(batch):
        found = kept.get(key(batch))
        if found is None:
            found = kept[key(batch)] = real(batch)
        return found

    network.emissions = served


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write host-work.json/md here")
    parser.add_argument("--label", default="", help="what this run measures (before, after)")
    parser.add_argument("--model", type=Path, default=MODEL, help="where the tagger is kept")
    args = parser.parse_args()
    if not (DATA / "dev.txt").is_file():
        print(f"skipped: CoNLL-2003 is not at {DATA}", file=sys.stderr)
        return 0
    torch.set_num_threads(1)
    from bistack.data.conll import read_conll
    from bistack.predictor import load_model

    tagger = load_model(trained_tagger(args.model))
    sentences = [list(s.tokens) for s in read_conll(DATA / "dev.txt")]
    whole = {
        "tags, network included": timed(lambda: tagger.tag_tokens(sentences, batch_size=256), 3),
    }
    singles = sentences[:200]
    one = single_latencies(tagger, singles)
    without_network(tagger)
    single_latencies(tagger, singles)  # each sentence's emissions recorded
    one_host = single_latencies(tagger, singles)
    modes = {
        "tags": lambda: tagger.tag_tokens(sentences, batch_size=256),
        "confidences": lambda: tagger.analyse_tokens(sentences, batch_size=256),
    }
    rows = {"reference": timed(reference)}
    rows |= {name: timed(work) for name, work in modes.items()}
    per = len(sentences)
    result = {
        "label": args.label,
        "sentences": per,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "reference_ms": {
            "best": min(rows["reference"]) * 1e3,
            "median": statistics.median(rows["reference"]) * 1e3,
        },
        "host_us_per_sentence": {
            name: {
                "best": min(runs) / per * 1e6,
                "median": statistics.median(runs) / per * 1e6,
                "max": max(runs) / per * 1e6,
                "per_reference": min(runs) / min(rows["reference"]),
            }
            for name, runs in rows.items()
            if name != "reference"
        },
        "cpu_tags_per_second_batch256": per / min(whole["tags, network included"]),
        "batch1_p50_ms": statistics.median(one) * 1e3,
        "batch1_host_p50_us": statistics.median(one_host) * 1e6,
    }
    print(json.dumps(result))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"host-work{('-' + args.label) if args.label else ''}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
