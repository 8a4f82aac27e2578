"""Does an exported model predict what its PyTorch model predicts? On every dev example:

- CoNLL-2003 dev: the BiLSTM-CRF tagger's tags on every sentence, its entities, each token's
  and each entity's confidence and the 3 best analyses with their probabilities (the output
  math PyTorch and the runtime share, over the emissions each computes);
- SST-2 dev: the BiLSTM-attention classifier's labels, probabilities (within 1e-5) and
  attention weights;
- CommonLit: the BiLSTM regressor's calibrated values (within 1e-5) on every excerpt (the data
  has no dev file; the model's own dev split is drawn from these excerpts);
- the same for a classifier and a regressor over MiniLM's layers, and for the stacked
  CoNLL-2003 tagger (MiniLM's word states beside words, characters and casing), whose
  exports hold the transformer too.

    .venv/bin/bistack train configs/conll03-bilstm-crf.yaml --set train.max_epochs=8 \\
        --output runs/conll03-confidence
    .venv/bin/bistack train configs/sst2-bilstm-attention.yaml --set train.max_epochs=4 \\
        --output runs/sst2-confidence
    .venv/bin/bistack train configs/commonlit-bilstm.yaml --set train.max_epochs=5 \\
        --output runs/commonlit-export
    head -n 5001 ../shared/data/sst2/train.tsv > runs/sst2-train-5k.tsv
    .venv/bin/bistack train configs/sst2-minilm-layers.yaml --output runs/sst2-minilm-export \\
        --set data.train=runs/sst2-train-5k.tsv --set train.max_epochs=3
    .venv/bin/bistack train configs/commonlit-minilm-layers.yaml \\
        --output runs/commonlit-minilm-export --set train.max_epochs=5
    .venv/bin/bistack train configs/conll03-stacked-minilm-crf.yaml --set train.max_epochs=3 \\
        --output runs/benchmarks/stacked-conll03/stacked-seed1
    OMP_NUM_THREADS=1 bash benchmarks/stacked.sh sst2 stacked -- 1
    .venv/bin/python benchmarks/export_parity.py [ROW ...]

ROW: conll03, sst2, commonlit, sst2-layers, commonlit-layers, conll03-stacked, sst2-stacked
(every row whose model exists, by default); a row not remeasured keeps its last result in
benchmarks/results/export-parity.json. The SST-2 model over MiniLM's layers trains on the first
5,000 training sentences, enough for a parity check. Each model is exported with ``bistack
export`` to ``<run>/onnx``. Writes benchmarks/results/export-parity.{md,json}.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from bistack.data.conll import read_conll
from bistack.data.tables import read_table
from bistack.predictor import load_model, open_model
from bistack.schemes import spans_from_tags

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
RUNS = {"conll03": "runs/conll03-confidence", "sst2": "runs/sst2-confidence"}
RUNS |= {"commonlit": "runs/commonlit-export", "sst2-layers": "runs/sst2-minilm-export"}
RUNS["commonlit-layers"] = "runs/commonlit-minilm-export"
RUNS["conll03-stacked"] = "runs/benchmarks/stacked-conll03/stacked-seed1"
RUNS["sst2-stacked"] = "runs/benchmarks/stacked-sst2/stacked-seed1"


def exported(run: str) -> tuple[object, object]:
    """The PyTorch model and its export, made with the command a user runs."""
    model_dir, output = ROOT / run / "model", ROOT / run / "onnx"
    command = [sys.executable, "-m", "bistack", "export", str(model_dir)]
    subprocess.run([*command, "--output", str(output), "--overwrite"], check=True)
    return load_model(model_dir), open_model(output).model


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def tagging(run: str, name: str) -> dict:
    """Tags and entities on every CoNLL-2003 dev sentence."""
    tagger, onnx = exported(run)
    config = tagger.config.data
    sentences = read_conll(DATA / "conll2003" / "dev.txt", config.token_column, config.tag_column)
    tokens = [s.tokens for s in sentences]
    want, torch_s = timed(tagger.tag_tokens, tokens)
    got, onnx_s = timed(onnx.tag_tokens, tokens)
    same_tags = sum(a == b for a, b in zip(want, got, strict=True))
    same_entities = sum(
        spans_from_tags(a) == spans_from_tags(b) for a, b in zip(want, got, strict=True)
    )
    # Confidences and the 3 best analyses, by the output math both share.
    want_analyses, torch_confidence_s = timed(tagger.analyse_tokens, tokens, top_k=3)
    got_analyses, onnx_confidence_s = timed(onnx.analyse_tokens, tokens, top_k=3)
    pairs = list(zip(want_analyses, got_analyses, strict=True))
    token_gap = max(
        abs(x - y) for a, b in pairs for x, y in zip(a.confidences, b.confidences, strict=True)
    )
    entity_gaps = [
        abs(p - b.entities[span])
        for a, b in pairs
        for span, p in a.entities.items()
        if span in b.entities
    ]
    missing = sum(len(a.entities.keys() ^ b.entities.keys()) for a, b in pairs)
    top_gap = max(
        abs(x[1] - y[1])
        for a, b in pairs
        for x, y in zip(a.alternatives, b.alternatives, strict=False)
    )
    same_alternatives = sum(
        [t for t, _ in a.alternatives] == [t for t, _ in b.alternatives] for a, b in pairs
    )
    return {
        "data": f"CoNLL-2003 dev, {name}",
        "examples": len(tokens),
        "identical_tags": same_tags,
        "identical_entities": same_entities,
        "entities": sum(len(spans_from_tags(a)) for a in want),
        "dev_f1_pytorch": tagger.evaluate(DATA / "conll2003" / "dev.txt").micro.f1,
        "dev_f1_onnx": onnx.evaluate(DATA / "conll2003" / "dev.txt").micro.f1,
        "seconds_pytorch": torch_s,
        "seconds_onnx": onnx_s,
        "max_token_confidence_difference": token_gap,
        "max_entity_confidence_difference": max(entity_gaps),
        "entities_compared": len(entity_gaps),
        "entities_in_one_only": missing,
        "identical_top3_paths": same_alternatives,
        "max_top3_probability_difference": top_gap,
        "seconds_confidence_pytorch": torch_confidence_s,
        "seconds_confidence_onnx": onnx_confidence_s,
    }


def classification(run: str, name: str) -> dict:
    """Labels, probabilities (and attention, where the model attends) on SST-2 dev."""
    classifier, onnx = exported(run)
    data = classifier.config.data
    path = DATA / "sst2" / "dev.tsv"
    examples = read_table(path, data.text_column, data.label_columns, file_format=data.format)
    texts = [e.text for e in examples]
    attends = classifier.attends
    want, torch_s = timed(classifier.predict, texts, attention=attends)
    got, onnx_s = timed(onnx.predict, texts, attention=attends)
    pairs = list(zip(want, got, strict=True))
    probability_gap = max(
        abs(a.probabilities[k] - b.probabilities[k]) for a, b in pairs for k in a.probabilities
    )
    attention_gap = None
    if attends:
        attention_gap = max(
            abs(x[1] - y[1])
            for a, b in pairs
            for x, y in zip(a.attention, b.attention, strict=True)
        )
    return {
        "data": f"SST-2 dev, {name}",
        "examples": len(texts),
        "identical_labels": sum(a.label == b.label for a, b in pairs),
        "max_probability_difference": probability_gap,
        "max_attention_difference": attention_gap,
        "dev_accuracy_pytorch": classifier.evaluate(path)["accuracy"],
        "dev_accuracy_onnx": onnx.evaluate(path)["accuracy"],
        "seconds_pytorch": torch_s,
        "seconds_onnx": onnx_s,
    }


def regression(run: str, name: str) -> dict:
    """Calibrated values on every CommonLit excerpt."""
    regressor, onnx = exported(run)
    data = regressor.config.data
    path = DATA / "commonlit" / "train.csv"
    examples = read_table(path, data.text_column, data.label_columns, file_format=data.format)
    texts = [e.text for e in examples]
    want, torch_s = timed(regressor.predict, texts)
    got, onnx_s = timed(onnx.predict, texts)
    target = regressor.targets[0]
    gaps = [abs(a.values[target] - b.values[target]) for a, b in zip(want, got, strict=True)]
    return {
        "data": f"CommonLit (every excerpt), {name}",
        "examples": len(texts),
        "max_value_difference": max(gaps),
        "within_1e-5": sum(gap <= 1e-5 for gap in gaps),
        "within_1e-4": sum(gap <= 1e-4 for gap in gaps),
        "seconds_pytorch": torch_s,
        "seconds_onnx": onnx_s,
    }


def report(rows: dict) -> str:
    lines = [
        "# Exported (ONNX, onnxruntime) against PyTorch, on every dev example",
        "",
        "Reproduce: the commands in `benchmarks/export_parity.py`'s docstring (train the models,"
        " then `.venv/bin/python benchmarks/export_parity.py`). Each model is exported with"
        " `bistack export MODEL --format onnx --output DIR`.",
        "",
        "| data | examples | check | result |",
        "|---|---:|---|---|",
    ]
    times = []
    for row in rows.values():
        if "identical_tags" in row:
            lines += [
                f"| {row['data']} | {row['examples']} | identical tags |"
                f" {row['identical_tags']} / {row['examples']} |",
                f"| | | identical entities | {row['identical_entities']} / {row['examples']}"
                f" sentences ({row['entities']} entities) |",
                f"| | | dev F1 (conlleval) | PyTorch {row['dev_f1_pytorch']:.2f}, ONNX"
                f" {row['dev_f1_onnx']:.2f} |",
            ]
            if "max_token_confidence_difference" in row:
                lines += [
                    f"| | | max token confidence difference |"
                    f" {row['max_token_confidence_difference']:.1e} |",
                    f"| | | max entity confidence difference |"
                    f" {row['max_entity_confidence_difference']:.1e} over"
                    f" {row['entities_compared']} entities ({row['entities_in_one_only']} in one"
                    " only) |",
                    f"| | | identical 3 best analyses | {row['identical_top3_paths']} /"
                    f" {row['examples']}, probabilities within"
                    f" {row['max_top3_probability_difference']:.1e} |",
                ]
                times.append(
                    f"{row['data']} {row['seconds_confidence_pytorch']:.1f} s /"
                    f" {row['seconds_confidence_onnx']:.1f} s (confidences and 3 best)"
                )
            times.append(
                f"{row['data']} {row['seconds_pytorch']:.1f} s / {row['seconds_onnx']:.1f} s"
                " (tags only)"
            )
            continue
    for row in rows.values():
        if "identical_labels" in row:
            lines += [
                f"| {row['data']} | {row['examples']} | identical labels |"
                f" {row['identical_labels']} / {row['examples']} |",
                f"| | | max probability difference | {row['max_probability_difference']:.1e} |",
            ]
            if row["max_attention_difference"] is not None:
                lines.append(
                    f"| | | max attention weight difference |"
                    f" {row['max_attention_difference']:.1e} |"
                )
            lines.append(
                f"| | | dev accuracy | PyTorch {row['dev_accuracy_pytorch']:.2f}, ONNX"
                f" {row['dev_accuracy_onnx']:.2f} |"
            )
        elif "max_value_difference" in row:
            lines.append(
                f"| {row['data']} | {row['examples']} | max value difference (calibrated,"
                f" original units) | {row['max_value_difference']:.1e} ({row['within_1e-5']} /"
                f" {row['examples']} within 1e-5, {row['within_1e-4']} within 1e-4) |"
            )
        else:
            continue
        times.append(f"{row['data']} {row['seconds_pytorch']:.1f} s / {row['seconds_onnx']:.1f} s")
    lines += [
        "",
        "Wall time of each comparison (one process, PyTorch then onnxruntime): "
        + "; ".join(times)
        + ". `make bench` measures speed and memory properly, each runtime in its own process.",
        "",
    ]
    return "\n".join(lines)


# Each row: how it is measured, the data it needs, and what its model is.
ROWS = {
    "conll03": (tagging, "conll2003/dev.txt", "BiLSTM-CRF"),
    "sst2": (classification, "sst2/dev.tsv", "BiLSTM + attention"),
    "commonlit": (regression, "commonlit/train.csv", "BiLSTM"),
    "sst2-layers": (
        classification,
        "sst2/dev.tsv",
        "BiLSTM over MiniLM's layers (backbone in the graph)",
    ),
    "commonlit-layers": (
        regression,
        "commonlit/train.csv",
        "BiLSTM over MiniLM's layers (backbone in the graph)",
    ),
    "conll03-stacked": (
        tagging,
        "conll2003/dev.txt",
        "stacked MiniLM word states + words, chars, casing, BiLSTM-CRF (backbone in the graph)",
    ),
    "sst2-stacked": (
        classification,
        "sst2/dev.tsv",
        "MiniLM's layers stacked with words, chars, casing, BiLSTM + attention (backbone in"
        " the graph)",
    ),
}


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(ROWS))
    if unknown:
        raise SystemExit(f"unknown rows {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    results = RESULTS / "export-parity.json"
    rows = json.loads(results.read_text()) if results.exists() else {}
    for name in names or list(ROWS):
        compare, data, description = ROWS[name]
        if not (DATA / data).exists():
            raise SystemExit(f"skipping: {DATA / data} not found")
        if names or (ROOT / RUNS[name] / "model").exists():
            rows[name] = compare(RUNS[name], description)
    ordered = {name: rows[name] for name in ROWS if name in rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(ordered, indent=2) + "\n")
    (RESULTS / "export-parity.md").write_text(report(ordered))
    print(report(ordered))


if __name__ == "__main__":
    main(sys.argv[1:])
