"""Corpus prediction at scale: peak memory on 10k and 200k lines (it must not grow with the
input), and lines/s with 1 and 2 worker processes against the single-process path.

    .venv/bin/bistack train configs/conll03-bilstm-crf.yaml --set train.max_epochs=15 \\
        --output runs/conll03-confidence
    .venv/bin/python benchmarks/corpus_predict.py runs/conll03-confidence/model

The lines are CoNLL-2003 train sentences as raw text, repeated in order to the size wanted.
Each figure is one ``bistack predict --input FILE --output FILE --format jsonl`` process, run
alone on this machine, whole (start-up and model loading included); peak RSS is the kernel's
``ru_maxrss`` that ``wait4`` reports for it (the largest of the main process and its workers,
for worker runs: Linux counts waited-for descendants in a process's peak). Writes
benchmarks/results/corpus-predict.{md,json}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bistack.data.conll import read_conll

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT.parent / "shared" / "data" / "conll2003" / "train.txt"
RESULTS = ROOT / "benchmarks" / "results"
MEMORY_SIZES = (10_000, 20_000, 200_000)  # 20,000: past one pass over the train set
SPEED_SIZE = 20_000


def write_lines(path: Path, count: int) -> Path:
    sentences = [" ".join(s.tokens) for s in read_conll(TRAIN, 0, 3)]
    with path.open("w") as handle:
        for i in range(count):
            handle.write(sentences[i % len(sentences)] + "\n")
    return path


def predict(model: str, source: Path, output: Path, *extra: str) -> dict[str, float]:
    """One whole ``bistack predict`` run: seconds, lines/s and peak RSS (MiB)."""
    command = [sys.executable, "-m", "bistack", "predict", model, "--input", str(source),
               "--output", str(output), "--overwrite", "--format", "jsonl", "--no-progress",
               *extra]  # fmt: skip
    started = time.perf_counter()
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read()}")
    lengths = [len(line.split()) for line in source.open()]
    assert sum(1 for _ in output.open()) == len(lengths)
    return {"lines": len(lengths), "longest": max(lengths), "seconds": round(seconds, 1),
            "lines_per_s": round(len(lengths) / seconds),
            "peak_rss_mib": round(usage.ru_maxrss / 1024)}  # fmt: skip


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else "runs/conll03-confidence/model"
    results: dict[str, dict] = {"memory": {}, "workers": {}}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.jsonl"
        for size in MEMORY_SIZES:
            source = write_lines(Path(folder) / f"in-{size}.txt", size)
            results["memory"][size] = predict(model, source, out)
            print(size, results["memory"][size], flush=True)
        source = write_lines(Path(folder) / f"in-{SPEED_SIZE}.txt", SPEED_SIZE)
        for name, extra in (("one process", ()), ("1 worker", ("--workers", "1")),
                            ("2 workers", ("--workers", "2"))):  # fmt: skip
            results["workers"][name] = predict(model, source, out, *extra)
            print(name, results["workers"][name], flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "corpus-predict.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / "corpus-predict.md").write_text(report(results, model))


def report(results: dict, model: str) -> str:
    memory, workers = results["memory"], results["workers"]
    first, one_pass, large = (memory[size] for size in MEMORY_SIZES)
    base = workers["one process"]["lines_per_s"]
    lines = [
        "# Corpus prediction: memory and workers",
        "",
        f"`.venv/bin/python benchmarks/corpus_predict.py {model}` (CoNLL-2003 BiLSTM-CRF, "
        "CoNLL-2003 train sentences as raw text, JSON lines out with token and entity "
        "confidences; 2 CPU cores).",
        "",
        "## Peak memory does not grow with the input",
        "",
        "| lines | longest line (tokens) | seconds | lines/s | peak RSS (MiB) |",
        "|---|---|---|---|---|",
        *(
            f"| {r['lines']:,} | {r['longest']} | {r['seconds']} | {r['lines_per_s']:,} "
            f"| {r['peak_rss_mib']} |"
            for r in memory.values()
        ),
        "",
        f"From 10,000 to 200,000 lines: {large['peak_rss_mib'] - first['peak_rss_mib']:+} MiB; "
        f"from 20,000 (one pass over the train set, so every sentence length has been seen) "
        f"to 200,000 (ten passes): {large['peak_rss_mib'] - one_pass['peak_rss_mib']:+} MiB; "
        f"from 10,000 to 20,000: {one_pass['peak_rss_mib'] - first['peak_rss_mib']:+} MiB, "
        "which shows the size of run-to-run noise.",
        "",
        f"## Workers ({SPEED_SIZE:,} lines, whole runs with start-up)",
        "",
        "| run | seconds | lines/s | vs one process |",
        "|---|---|---|---|",
        *(
            f"| {name} | {r['seconds']} | {r['lines_per_s']:,} | {r['lines_per_s'] / base:.2f}x |"
            for name, r in workers.items()
        ),
        "",
        "One process runs torch with all its threads (2 here); each worker runs one thread.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
