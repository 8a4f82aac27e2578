"""Ensembles and blends served as one network, PyTorch against exported: the files' size,
the peak resident memory of a process predicting (its own maximum, measured, not estimated)
and texts/s at batch 1 and 32, each runtime at the same threads in a process of its own.

The models: a CommonLit 5-fold ensemble and a blend of three such CVs over the frozen MiniLM
(``compare-poolers --folds 5 --blend``, as ``benchmarks/blend_commonlit.py`` makes them in
``runs/compare-commonlit``: LSTM, GRU and attention heads), a blend with one recurrent run
(LSTM, a weighted sum and the mean of the layers: made here when missing, in
``runs/ensemble-serving/light-blend``), predicting the first ``--texts`` excerpts of
CommonLit's training file; and a CoNLL-2003 5-fold ensemble of the MiniLM layer tagger with a
CRF (a CV of the recipe on the first 2,000 training sentences, 3 epochs a fold: made here when
missing, in ``runs/ensemble-serving/conll-layer-cv``), tagging the first ``--texts`` sentences
of dev as raw text. Each is exported (its members over the shared backbone hold their heads
alone, the backbone's graph once) and one member alone too, for scale. Speed and memory do not
depend on whether a model saw the texts.

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ensemble_serving.py --threads 1
(``--cases NAME...`` measures those cases again, the other rows kept from the last run.)
Writes benchmarks/results/ensemble-serving.{md,json}.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from precision_dev import conll_cut

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED = ROOT.parent / "shared" / "data"
DATA = SHARED / "commonlit" / "train.csv"
RUNS = ROOT / "runs" / "compare-commonlit"
WORK = ROOT / "runs" / "ensemble-serving"
TAGGER_CV = WORK / "conll-layer-cv"
LIGHT_BLEND = WORK / "light-blend"
LIGHT_POOLERS = "lstm,weighted,mean"


@dataclass(frozen=True)
class Case:
    """A model served both ways: its ``texts`` (a JSON list in a file) and the fold model that
    stands for one member."""

    name: str
    model: Path
    member: Path
    texts: str  # "commonlit" or "conll"


CASES = [
    Case("5-fold ensemble", RUNS / "lstm-mean" / "model",
         RUNS / "lstm-mean" / "folds" / "fold0" / "model", "commonlit"),
    Case("3-run blend", RUNS / "blend" / "model",
         RUNS / "lstm-mean" / "folds" / "fold0" / "model", "commonlit"),
    Case(f"3-run blend ({LIGHT_POOLERS})", LIGHT_BLEND / "blend" / "model",
         LIGHT_BLEND / "lstm-mean" / "folds" / "fold0" / "model", "commonlit"),
    Case("5-fold layer tagger", TAGGER_CV / "model",
         TAGGER_CV / "folds" / "fold0" / "model", "conll"),
]  # fmt: skip


def child(model: str, texts_file: str, batch: int, threads: int) -> None:
    """In a process of its own: open ``model``, predict the texts once to warm up, then time
    a second pass; print its texts/s and the process's peak resident memory."""
    import torch

    from bistack.predictor import open_model

    torch.set_num_threads(threads)
    texts = json.loads(Path(texts_file).read_text())
    opened = open_model(model, threads=threads)
    opened.predict(texts[:batch], batch_size=batch)
    started = time.perf_counter()
    opened.predict(texts, batch_size=batch)
    seconds = time.perf_counter() - started
    print(json.dumps({"texts_per_second": len(texts) / seconds, "peak_rss_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak resident memory since it started (``VmHWM``: getrusage's maximum
    would carry over the parent's from before the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status: the peak is measured on Linux")


def measured(model: Path, texts_file: Path, batch: int, threads: int) -> dict:
    command = [sys.executable, __file__, "--child", str(model), str(texts_file), str(batch)]
    done = subprocess.run(
        [*command, "--threads", str(threads)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def tagger_cv(threads: int) -> None:
    """The CoNLL-2003 layer tagger's 5-fold CV (its ensemble is the model served)."""
    import torch

    import bistack

    torch.set_num_threads(threads)
    cut = conll_cut(2000)
    recipe = ROOT / "configs" / "conll03-minilm-layers-crf.yaml"
    settings = {
        "data.train": str(cut),
        "data.dev": None,
        "train.max_epochs": 3,
        "train.patience": 3,
    }
    bistack.cross_validate(recipe, TAGGER_CV, settings, folds=5, overwrite=True)


def light_blend(threads: int) -> None:
    """A blend of three CommonLit CVs of which one is recurrent (its heads' weights are what
    a blend adds to the backbone's files), as the blend guide makes one."""
    command = [
        sys.executable, "-m", "bistack", "compare-poolers", "configs/commonlit-minilm-layers.yaml",
        "--poolers", LIGHT_POOLERS, "--folds", "5", "--blend", "--output", str(LIGHT_BLEND),
        "--no-progress", "--threads", str(threads),
    ]  # fmt: skip
    subprocess.run(command, check=True, cwd=ROOT)


def conll_texts(count: int) -> list[str]:
    """The first ``count`` sentences of CoNLL-2003 dev, as raw text."""
    from bistack.data.conll import read_conll

    sentences = read_conll(SHARED / "conll2003" / "dev.txt")
    return [" ".join(sentence.tokens) for sentence in sentences[:count]]


def speed(row: dict, batch: int) -> str:
    low, high = row[f"texts_per_second_batch{batch}_range"]
    return f"{row[f'texts_per_second_batch{batch}']:.1f} ({low:.1f}-{high:.1f})"


def folder_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "TEXTS", "BATCH"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--texts", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each cell, in turn")
    parser.add_argument(
        "--cases", nargs="+", choices=[c.name for c in CASES], help="only these (others kept)"
    )
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.threads)
        return 0
    missing = [str(p) for p in (DATA, SHARED / "conll2003", RUNS) if not p.exists()]
    if missing:
        print(f"skipped: missing {', '.join(missing)} (benchmarks/blend_commonlit.py makes runs)")
        return 0
    from bistack.export.onnx_export import export_model

    WORK.mkdir(parents=True, exist_ok=True)
    cases = [c for c in CASES if args.cases is None or c.name in args.cases]
    models = {c.model for c in cases}
    for made, make in (
        (TAGGER_CV / "model", tagger_cv),
        (LIGHT_BLEND / "blend" / "model", light_blend),
    ):
        if made in models and not made.exists():
            make(args.threads)
    kept = []
    if args.cases is not None:
        last = json.loads((RESULTS / "ensemble-serving.json").read_text())
        if (last["threads"], last["texts"], last["repeats"]) != (
            args.threads,
            args.texts,
            args.repeats,
        ):
            parser.error("--cases: the last run's threads, texts and repeats were not these")
        kept = [row for row in last["rows"] if row["model"] not in args.cases]
    texts_files = {"commonlit": WORK / "texts.json", "conll": WORK / "conll-texts.json"}
    with DATA.open(newline="", encoding="utf-8") as handle:
        excerpts = [row["excerpt"] for row in csv.DictReader(handle)][: args.texts]
    texts_files["commonlit"].write_text(json.dumps(excerpts))
    texts_files["conll"].write_text(json.dumps(conll_texts(args.texts)))
    rows, members = [], {}
    for case in cases:
        if case.member not in members:
            one = export_model(case.member, WORK / f"one-member-{case.texts}", overwrite=True)
            members[case.member] = folder_mb(one)
        exported = export_model(case.model, WORK / case.name.replace(" ", "-"), overwrite=True)
        sides = {"PyTorch": case.model, "exported": exported}
        found: dict[tuple[str, int], list[dict]] = {}
        for batch in (1, 32):
            for _ in range(args.repeats):  # the two runtimes in turn
                for runtime, folder in sides.items():
                    run = measured(folder, texts_files[case.texts], batch, args.threads)
                    found.setdefault((runtime, batch), []).append(run)
        for runtime, folder in sides.items():
            row = {"model": case.name, "runtime": runtime, "size_mb": folder_mb(folder),
                   "one_member_mb": members[case.member]}  # fmt: skip
            for batch in (1, 32):
                runs = found[(runtime, batch)]
                speeds = [r["texts_per_second"] for r in runs]
                row[f"texts_per_second_batch{batch}"] = statistics.median(speeds)
                row[f"texts_per_second_batch{batch}_range"] = [min(speeds), max(speeds)]
                row[f"peak_rss_mb_batch{batch}"] = max(r["peak_rss_mb"] for r in runs)
            rows.append(row)
            print(json.dumps(row), flush=True)
    order = [c.name for c in CASES]
    rows = sorted([*kept, *rows], key=lambda row: order.index(row["model"]))
    summary = {"threads": args.threads, "texts": args.texts, "repeats": args.repeats, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ensemble-serving.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        "# Ensembles and blends served as one network: PyTorch against exported",
        "",
        f"The first {args.texts} CommonLit excerpts (the regressors) or CoNLL-2003 dev sentences "
        f"(the tagger), {args.threads} thread(s), each runtime in a process of its own (peak "
        "RSS: the process's maximum); beside each, one member exported alone (whole graph). "
        f"Each cell run {args.repeats} times, the two runtimes in turn: texts/s the median "
        "(min-max), peak RSS the largest.",
        "",
        "| model | runtime | files MB | one member MB | texts/s batch 1 | texts/s batch 32 "
        "| peak RSS MB batch 1 | peak RSS MB batch 32 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['model']} | {r['runtime']} | {r['size_mb']:.1f} | {r['one_member_mb']:.1f} | "
            f"{speed(r, 1)} | {speed(r, 32)} | "
            f"{r['peak_rss_mb_batch1']:.0f} | {r['peak_rss_mb_batch32']:.0f} |"
            for r in rows
        ),
        "",
        f"`OMP_NUM_THREADS={args.threads} .venv/bin/python benchmarks/ensemble_serving.py "
        f"--threads {args.threads} --repeats {args.repeats}`",
    ]
    (RESULTS / "ensemble-serving.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
