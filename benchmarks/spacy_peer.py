"""bistack's CoNLL-2003 tagger beside spaCy's CPU "efficiency" NER pipeline, in one run.

    .venv/bin/python benchmarks/spacy_peer.py [--threads 1] [--bistack-epochs 12]
    .venv/bin/python benchmarks/spacy_peer.py --prediction-only   # the trained models again

Both train on the same CoNLL-2003 train split with the same threads, one after the other in
this run: spaCy's pipeline (``benchmarks/peers/spacy-ner-efficiency.cfg``, made by ``spacy init
config --pipeline ner --optimize efficiency``; the data converted by ``spacy convert``) in the
peer environment (``.venv-peers``), then bistack's ``configs/conll03-bilstm-crf.yaml``. Reported:

- dev F1 of each, as conlleval scores it (spaCy's predictions written back as IOB1, the file's
  scheme, and scored by bistack's conlleval scorer, which seqeval is held to in the tests);
- spaCy's training wall time to its best dev score, and bistack's to the same dev F1;
- prediction words/s at batch 1, 32 and 1,000 sentences (``nlp.pipe`` for spaCy; tags only, as
  spaCy gives, from the same pre-tokenised dev sentences), single-sentence latency p50/p99;
  bistack's batch-1 rows again with its cache of words' character encodings off, as for words
  it has never seen;
- peak resident memory of each training and each prediction process;
- the same prediction rows for bistack's model exported to ONNX (``bistack export``), run on
  onnxruntime in a process that imports no torch.

``--prediction-only`` keeps the training rows of the last run (benchmarks/results/spacy.json)
and measures prediction again, from the models that run trained. Writes
benchmarks/results/spacy.{md,json}; runs go to runs/benchmarks/spacy/.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "conll2003"
PEERS = ROOT / ".venv-peers" / "bin" / "python"
RUNS = ROOT / "runs" / "benchmarks" / "spacy"
RESULTS = ROOT / "benchmarks" / "results"
CONFIG = ROOT / "benchmarks" / "peers" / "spacy-ner-efficiency.cfg"


def run_measured(command: list[str], threads: int, on_line=None) -> tuple[int, float]:
    """Run ``command`` (its output lines to ``on_line(line, seconds since start)``); its exit
    status and peak resident memory in MB (from ``wait4``, the child's own)."""
    env = os.environ | {"OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    started = time.monotonic()
    assert process.stdout is not None
    for line in process.stdout:
        print(line, end="", flush=True)
        if on_line is not None:
            on_line(line, time.monotonic() - started)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss / 1024


def convert(threads: int) -> Path:
    corpus = RUNS / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        if not (corpus / f"{split}.spacy").exists():
            command = [str(PEERS), "-m", "spacy", "convert", str(DATA / f"{split}.txt"),
                       str(corpus), "--converter", "ner", "--n-sents", "10"]  # fmt: skip
            status, _ = run_measured(command, threads)
            if status:
                raise SystemExit(f"spacy convert failed on {split}")
    return corpus


def train_spacy(corpus: Path, threads: int) -> dict:
    """spaCy's training, each evaluation row timed as it is printed."""
    evaluations = []

    def on_line(line: str, seconds: float) -> None:
        # The console logger's rows: E  #  LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE
        fields = line.split()
        if len(fields) == 8 and fields[0].isdigit() and fields[1].isdigit():
            evaluations.append({"step": int(fields[1]), "ents_f": float(fields[4]), "s": seconds})

    output = RUNS / "spacy-model"
    command = [str(PEERS), "-m", "spacy", "train", str(CONFIG), "--output", str(output),
               "--paths.train", str(corpus / "train.spacy"),
               "--paths.dev", str(corpus / "dev.spacy")]  # fmt: skip
    status, peak = run_measured(command, threads, on_line)
    if status or not evaluations:
        raise SystemExit("spacy train failed")
    best = max(evaluations, key=lambda e: e["ents_f"])
    return {
        "model": str(output / "model-best"),
        "best_step": best["step"],
        "seconds_to_best": best["s"],
        "seconds_total": evaluations[-1]["s"],
        "spacy_dev_f1": best["ents_f"],
        "train_peak_rss_mb": peak,
    }


def train_bistack(threads: int, epochs: int) -> dict:
    output = RUNS / "bistack"
    command = [str(ROOT / ".venv" / "bin" / "bistack"), "train",
               str(ROOT / "configs" / "conll03-bilstm-crf.yaml"), "--output", str(output),
               "--overwrite", "--no-progress", "--threads", str(threads),
               "--set", f"train.max_epochs={epochs}"]  # fmt: skip
    status, peak = run_measured(command, threads)
    if status:
        raise SystemExit("bistack train failed")
    rows = [
        {"epoch": int(r["epoch"]), "f1": float(r["dev_f1"]), "s": float(r["seconds"])}
        for r in csv.DictReader((output / "metrics.csv").open())
    ]
    return {"model": str(output / "model"), "epochs": rows, "train_peak_rss_mb": peak}


def measure_bistack(model: str, sentences_path: str) -> None:
    """The bistack side of prediction (run in its own process): the spaCy script's measures."""
    from bistack.models.spelling_cache import each_batch_alone
    from bistack.predictor import open_model

    # An exported model runs on onnxruntime only: torch is never imported.
    tagger = open_model(model, threads=int(os.environ.get("OMP_NUM_THREADS", "1"))).model
    sentences = json.loads(Path(sentences_path).read_text(encoding="utf-8"))
    words = sum(len(s) for s in sentences)

    def one_at_a_time(chosen: list[list[str]]) -> list[float]:
        latencies = []
        for tokens in chosen:
            start = time.perf_counter()
            tagger.tag_tokens([tokens])
            latencies.append(1000 * (time.perf_counter() - start))
        return sorted(latencies)

    tags = tagger.tag_tokens(sentences)
    speeds = {}
    for batch_size in (1, 32, 1000):
        start = time.perf_counter()
        tagger.tag_tokens(sentences, batch_size=batch_size)
        speeds[str(batch_size)] = words / (time.perf_counter() - start)
    latencies = one_at_a_time(sentences[:500])
    # The PyTorch tagger keeps the character encodings of the words it has seen (all of dev's
    # by now); again without them, as for words never seen (the exported model has none).
    with each_batch_alone():
        start = time.perf_counter()
        tagger.tag_tokens(sentences, batch_size=1)
        speeds["1, unseen"] = words / (time.perf_counter() - start)
        unseen = one_at_a_time(sentences[:500])
    print(
        json.dumps(
            {
                "tags": tags,
                "words_per_s": speeds,
                "latency_ms": {
                    "p50": statistics.median(latencies),
                    "p99": latencies[int(0.99 * (len(latencies) - 1))],
                    "unseen p50": statistics.median(unseen),
                    "unseen p99": unseen[int(0.99 * (len(unseen) - 1))],
                },
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def predictions(command: list[str], threads: int) -> dict:
    env = os.environ | {"OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{command[1]} failed:\n{done.stderr[-3000:]}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1])


def medians(runs: list[dict]) -> dict:
    """One runtime's measures over the rounds: the median of each (words/s per batch size,
    latency p50 and p99, peak RSS), each round's p50 beside them, and the first round's tags
    (prediction is deterministic)."""
    return {
        "tags": runs[0]["tags"],
        "words_per_s": {
            size: statistics.median(run["words_per_s"][size] for run in runs)
            for size in runs[0]["words_per_s"]
        },
        "latency_ms": {
            name: statistics.median(run["latency_ms"][name] for run in runs)
            for name in runs[0]["latency_ms"]
        },
        "peak_rss_mb": statistics.median(run["peak_rss_mb"] for run in runs),
        "p50_ms_each_round": [run["latency_ms"]["p50"] for run in runs],
    }


def conlleval_f1(dev, tags: list[list[str]]) -> float:
    """Entity micro F1 of ``tags`` (any scheme) against dev, both as IOB1, the file's scheme."""
    from bistack.metrics.entities import score_entities
    from bistack.schemes import convert_tags

    predicted = [convert_tags(t, "IOB1") for t in tags]
    return score_entities([s.tags for s in dev], predicted).micro.f1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bistack-epochs", type=int, default=12)
    parser.add_argument("--measure-bistack", nargs=2, metavar=("MODEL", "SENTENCES"))
    parser.add_argument("--prediction-only", action="store_true")
    parser.add_argument(
        "--rounds", type=int, default=5,
        help="prediction measured this many times, the three runtimes in turn; medians reported",
    )  # fmt: skip
    args = parser.parse_args()
    if args.measure_bistack:
        measure_bistack(*args.measure_bistack)
        return
    if not PEERS.exists():
        raise SystemExit("no .venv-peers: make .venv-peers/.installed (or make bench) creates it")
    if not DATA.exists():
        raise SystemExit(f"skipping: {DATA} not found")
    from bistack.data.conll import read_conll

    dev = read_conll(DATA / "dev.txt")
    sentences = RUNS / "dev-sentences.json"
    RUNS.mkdir(parents=True, exist_ok=True)
    sentences.write_text(json.dumps([s.tokens for s in dev]), encoding="utf-8")
    if args.prediction_only:
        last = json.loads((RESULTS / "spacy.json").read_text())
        spacy, bistack = last["spacy"], last["bistack"]
        command, threads = last["command"], last["threads"]
        if threads != args.threads:
            raise SystemExit(f"the last run used --threads {threads}; measure with the same")
    else:
        spacy = train_spacy(convert(args.threads), args.threads)
        bistack = train_bistack(args.threads, args.bistack_epochs)
        command = (
            f".venv/bin/python benchmarks/spacy_peer.py --threads {args.threads} "
            f"--bistack-epochs {args.bistack_epochs}"
        )
    exported = str(RUNS / "bistack" / "onnx")
    subprocess.run(
        [sys.executable, "-m", "bistack", "export", bistack["model"], "--output", exported,
         "--overwrite"], check=True)  # fmt: skip
    measure = [sys.executable, __file__, "--measure-bistack"]
    commands = {
        "spacy": [str(PEERS), str(ROOT / "benchmarks" / "peers" / "spacy_predict.py"),
                  spacy["model"], str(sentences), "--threads", str(args.threads)],
        "bistack": [*measure, bistack["model"], str(sentences)],
        "exported": [*measure, exported, str(sentences)],
    }  # fmt: skip
    rounds: dict[str, list[dict]] = {name: [] for name in commands}
    for _ in range(args.rounds):  # in turn, so the machine's slow spells fall on all three
        for name, each in commands.items():
            rounds[name].append(predictions(each, args.threads))
    spacy_run, bistack_run, exported_run = (medians(rounds[name]) for name in commands)
    spacy["dev_f1"] = conlleval_f1(dev, spacy_run.pop("tags"))
    exported_tags = exported_run.pop("tags")
    bistack_tags = bistack_run.pop("tags")
    bistack["dev_f1"] = conlleval_f1(dev, bistack_tags)
    exported_run["identical_tags"] = sum(
        a == b for a, b in zip(bistack_tags, exported_tags, strict=True)
    )
    reached = [e for e in bistack["epochs"] if e["f1"] >= spacy["dev_f1"]]
    bistack["seconds_to_spacy_f1"] = reached[0]["s"] if reached else None
    bistack["epoch_of_spacy_f1"] = reached[0]["epoch"] if reached else None
    result = {
        "threads": args.threads,
        "rounds": args.rounds,
        "command": command,
        "spacy": spacy | {"predict": spacy_run},
        "bistack": bistack | {"predict": bistack_run, "predict_onnx": exported_run},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "spacy.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "spacy.md").write_text(report(result))
    print(report(result))


def report(result: dict) -> str:
    spacy, ours = result["spacy"], result["bistack"]
    sp, bp, op = spacy["predict"], ours["predict"], ours["predict_onnx"]

    def lead(ours_value: float, theirs: float, higher: bool = True) -> str:
        ratio = ours_value / theirs if higher else theirs / ours_value
        return f"bistack {ratio:.2f}x" if ratio >= 1 else f"**spaCy {1 / ratio:.2f}x**"

    to_f1 = ours["seconds_to_spacy_f1"]
    lines = [
        "# bistack beside spaCy's CPU NER (CoNLL-2003 train, dev scored as conlleval does)",
        "",
        f"Command: `{result['command']}`; both with {result['threads']} thread(s), trained one"
        " after the other in that run. spaCy 3.8.18, `benchmarks/peers/spacy-ner-efficiency.cfg`"
        " (spacy init config --pipeline ner --optimize efficiency), data by `spacy convert"
        " --converter ner --n-sents 10`; bistack `configs/conll03-bilstm-crf.yaml`. Prediction"
        " tags the same pre-tokenised dev sentences (3,250); spaCy's tags are written back as"
        ' IOB1 and both are scored by the same conlleval scorer. "bistack, ONNX": the same'
        " model after `bistack export`, on onnxruntime in a process without torch (its tags"
        f" identical to PyTorch's on {op['identical_tags']:,} of 3,250 sentences); prediction"
        " is measured by `--prediction-only` runs too, from the trained models.",
        "",
        "| row | spaCy | bistack | who leads | bistack, ONNX | who leads |",
        "|---|---:|---:|---|---:|---|",
        f"| dev F1 (best model) | {spacy['dev_f1']:.2f} | {ours['dev_f1']:.2f} | "
        f"{'bistack' if ours['dev_f1'] > spacy['dev_f1'] else '**spaCy**'} by "
        f"{abs(ours['dev_f1'] - spacy['dev_f1']):.2f} | - | - |",
        f"| training wall time to spaCy's best dev score | {spacy['seconds_to_best']:.0f} s "
        f"(step {spacy['best_step']}) | "
        + (f"{to_f1:.0f} s (epoch {ours['epoch_of_spacy_f1']})" if to_f1 else "not reached")
        + f" | {lead(to_f1, spacy['seconds_to_best'], higher=False) if to_f1 else '**spaCy**'}"
        " | - | - |",
        f"| training wall time, whole run | {spacy['seconds_total']:.0f} s | "
        f"{ours['epochs'][-1]['s']:.0f} s ({len(ours['epochs'])} epochs) | - | - | - |",
        f"| training peak RSS | {spacy['train_peak_rss_mb']:,.0f} MB | "
        f"{ours['train_peak_rss_mb']:,.0f} MB | "
        f"{lead(ours['train_peak_rss_mb'], spacy['train_peak_rss_mb'], higher=False)}"
        " | - | - |",
    ]
    speed_rows = {"1": "batch 1", "32": "batch 32", "1000": "batch 1000",
                  "1, unseen": "batch 1, words unseen"}  # fmt: skip
    for batch in (b for b in speed_rows if b in bp["words_per_s"]):
        theirs = sp["words_per_s"][batch.split(",")[0]]  # spaCy: one figure, cache or not
        lines.append(
            f"| prediction words/s, {speed_rows[batch]} | {theirs:,.0f} | "
            f"{bp['words_per_s'][batch]:,.0f} | {lead(bp['words_per_s'][batch], theirs)} | "
            f"{op['words_per_s'][batch]:,.0f} | {lead(op['words_per_s'][batch], theirs)} |"
        )
    quantiles = ("p50", "p99", "unseen p50", "unseen p99")
    for quantile in (q for q in quantiles if q in bp["latency_ms"]):
        theirs = sp["latency_ms"][quantile.split()[-1]]  # spaCy: one figure, cache or not
        ours_ms, onnx_ms = bp["latency_ms"][quantile], op["latency_ms"][quantile]
        words = "words unseen" if quantile.startswith("unseen") else ""
        lines.append(
            f"| single-sentence latency {quantile.split()[-1]}{', ' + words if words else ''} | "
            f"{theirs:.2f} ms | {ours_ms:.2f} ms | {lead(ours_ms, theirs, higher=False)} | "
            f"{onnx_ms:.2f} ms | {lead(onnx_ms, theirs, higher=False)} |"
        )
    lines.append(
        f"| prediction peak RSS | {sp['peak_rss_mb']:,.0f} MB | {bp['peak_rss_mb']:,.0f} MB | "
        f"{lead(bp['peak_rss_mb'], sp['peak_rss_mb'], higher=False)} | "
        f"{op['peak_rss_mb']:,.0f} MB | "
        f"{lead(op['peak_rss_mb'], sp['peak_rss_mb'], higher=False)} |"
    )
    if "p50_ms_each_round" in sp:  # runs before rounds measured prediction once

        def each(run: dict) -> str:
            return ", ".join(f"{value:.2f}" for value in run["p50_ms_each_round"])

        lines += [
            "",
            f"Prediction rows: the median of {result['rounds']} rounds, the three runtimes "
            "measured in turn in each (on shared cores one measurement is not enough: two "
            "single runs of the same models put bistack's p50 at 3.21 and 1.49 ms). "
            f"Single-sentence p50 in each round, ms: spaCy {each(sp)}; bistack {each(bp)}; "
            f"bistack, ONNX {each(op)}.",
        ]
    if "unseen p50" in bp["latency_ms"]:
        lines += [
            "",
            "Words unseen: the PyTorch tagger keeps the character encoding of each word it has"
            " seen (the char BiLSTM is a third of a lone sentence's time at first sight,"
            " `benchmarks/results/batch1-profile.md`); the other batch-1 and latency rows come"
            " after it has tagged all of dev once, as a server that has run a while. The"
            " 'words unseen' rows measure it again with that cache off"
            " (`bistack.models.spelling_cache.each_batch_alone`), as for a text whose every word"
            " is new. spaCy has no such cache: its one figure is compared with both (the"
            " exported model has none either: its two rows measure the same thing twice).",
        ]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
