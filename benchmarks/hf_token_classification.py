"""The transformer peer: all-MiniLM-L6-v2 fine-tuned for token classification with HuggingFace
transformers' own recipe, on CoNLL-2003, beside bistack's taggers, in one run.

    make hf-peer    # its environment, .venv-hf-peer (transformers' Trainer needs accelerate)
    HF_HUB_OFFLINE=1 .venv-hf-peer/bin/python benchmarks/hf_token_classification.py \\
        [--epochs 3] [--threads 2] [NAME=BISTACK_MODEL_DIR ...]

The recipe is the one of transformers' token-classification example (``run_ner.py``):
``AutoModelForTokenClassification`` over the encoder, labels on each word's first subword (-100
on the others), AdamW at 5e-5 with linear warm-up (10% of the steps) and decay, weight decay
0.01, batches of 16, the best epoch by dev F1. Tags are trained as BIO (the file's IOB1 read
into BIO) and scored on CoNLL-2003 dev by bistack's conlleval scorer, as bistack's own taggers
are. Prediction words/s at batch 1 and 32 sentences is measured the way users call it:
``pipeline("token-classification", aggregation_strategy="first")`` on raw text (each dev
sentence's words joined by spaces), beside ``predict`` of each bistack model given on the
command line on the same texts, in this process, one after the other. Peak resident memory is
the process's after each part (training first, so the prediction rows read it as "so far").
Writes benchmarks/results/hf-peer.{md,json}; the fine-tuned model goes to runs/benchmarks/hf-peer.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import time
from pathlib import Path

import numpy as np
import torch

from bistack.data.conll import read_conll
from bistack.metrics.entities import score_entities
from bistack.models.backbone import resolve_backbone
from bistack.schemes import convert_tags

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "conll2003"
RESULTS = ROOT / "benchmarks" / "results"
OUTPUT = ROOT / "runs" / "benchmarks" / "hf-peer"
MAX_LENGTH = 128  # subwords, as bistack's stacked config reads


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class WordDataset(torch.utils.data.Dataset):
    """Sentences as the recipe feeds them: subword ids, and each word's label on its first
    subword (-100 on the rest and on special tokens)."""

    def __init__(self, tokenizer, sentences, label_ids) -> None:
        self.rows = []
        self.truncated_words = 0
        for sentence in sentences:
            encoding = tokenizer(
                sentence.tokens, is_split_into_words=True, truncation=True, max_length=MAX_LENGTH
            )
            tags = convert_tags(sentence.tags, "BIO")
            labels, seen = [], set()
            for word in encoding.word_ids():
                first = word is not None and word not in seen
                labels.append(label_ids[tags[word]] if first else -100)
                if word is not None:
                    seen.add(word)
            self.truncated_words += len(sentence.tokens) - len(seen)
            self.rows.append(dict(encoding) | {"labels": labels})

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        return self.rows[index]


def word_tags(logits: np.ndarray, dataset: WordDataset, labels: list[str], sentences) -> list:
    """Each sentence's predicted BIO tags, read at its words' first subwords (a word the
    truncation dropped is O)."""
    predicted = []
    for row, sentence, scores in zip(dataset.rows, sentences, logits, strict=True):
        tags = ["O"] * len(sentence.tokens)
        word_of = [i for i, label in enumerate(row["labels"]) if label != -100]
        for word, position in enumerate(word_of):
            tags[word] = labels[int(scores[position].argmax())]
        predicted.append(tags)
    return predicted


def fine_tune(epochs: int, limit: int | None) -> dict:
    from transformers import (
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        Trainer,
        TrainingArguments,
    )

    folder = str(resolve_backbone("default"))
    train, dev = read_conll(DATA / "train.txt")[:limit], read_conll(DATA / "dev.txt")[:limit]
    labels = sorted({t for s in train for t in convert_tags(s.tags, "BIO")})
    label_ids = {label: i for i, label in enumerate(labels)}
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForTokenClassification.from_pretrained(
        folder, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label_ids
    )
    train_set = WordDataset(tokenizer, train, label_ids)
    dev_set = WordDataset(tokenizer, dev, label_ids)
    gold = [convert_tags(s.tags, "BIO") for s in dev]

    def metrics(prediction) -> dict:
        tags = word_tags(prediction.predictions, dev_set, labels, dev)
        return {"f1": score_entities(gold, tags).micro.f1}

    arguments = TrainingArguments(
        output_dir=str(OUTPUT),
        learning_rate=5e-5,
        warmup_steps=0.1,  # a float below 1: that share of the steps (transformers 5)
        weight_decay=0.01,
        lr_scheduler_type="linear",
        num_train_epochs=epochs,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=64,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=1,
        load_best_model_at_end=True,
        metric_for_best_model="f1",
        logging_strategy="epoch",
        report_to=[],
        use_cpu=True,
        seed=1,
    )
    trainer = Trainer(
        model=model,
        args=arguments,
        train_dataset=train_set,
        eval_dataset=dev_set,
        data_collator=DataCollatorForTokenClassification(tokenizer),
        compute_metrics=metrics,
    )
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    history = [h for h in trainer.state.log_history if "eval_f1" in h]
    best = max(history, key=lambda h: h["eval_f1"])
    trainer.save_model(str(OUTPUT / "best"))
    tokenizer.save_pretrained(str(OUTPUT / "best"))
    return {
        "dev_f1": best["eval_f1"],
        "best_epoch": best["epoch"],
        "per_epoch_f1": [h["eval_f1"] for h in history],
        "train_seconds": seconds,
        "seconds_to_best": seconds * best["epoch"] / epochs,
        "truncated_dev_words": dev_set.truncated_words,
        "peak_rss_mb": peak_rss_mb(),
    }


def words_per_second(predict, texts: list[str], words: int, batch: int) -> dict:
    """Throughput of ``predict(batch_of_texts)`` over ``texts`` (the best of two passes) and,
    at batch 1, the median latency of a sentence."""
    best, latencies = 0.0, []
    for _ in range(2):
        started = time.perf_counter()
        for start in range(0, len(texts), batch):
            begun = time.perf_counter()
            predict(texts[start : start + batch])
            latencies.append(time.perf_counter() - begun)
        best = max(best, words / (time.perf_counter() - started))
    row = {f"words_per_s_batch{batch}": best}
    if batch == 1:
        row["p50_ms"] = float(np.median(latencies)) * 1000
    return row


def prediction_rows(name: str, predict, texts: list[str], words: int) -> dict:
    predict(texts[:32])  # warm
    row = {"name": name}
    for batch in (1, 32):
        row |= words_per_second(predict, texts, words, batch)
    return row | {"peak_rss_mb_so_far": peak_rss_mb()}


def bistack_row(name: str, model_dir: str) -> dict:
    """A bistack tagger's dev F1 (``evaluate``), its training time to the best epoch (its
    run's metrics.csv), and whether it reads document context."""
    from bistack.predictor import load_model

    checkpoint = Path(model_dir).parent / "checkpoint.safetensors"
    while checkpoint.exists():  # its run is still training (benchmarks/stacked.sh beside this)
        print(f"waiting for {checkpoint.parent} to finish", flush=True)
        time.sleep(60)
    tagger = load_model(model_dir)
    metrics = Path(model_dir).parent / "metrics.csv"
    to_best = None
    if metrics.is_file():
        rows = list(csv.DictReader(metrics.open()))
        best = max(rows, key=lambda r: float(r["dev_f1"]))
        to_best = float(best["seconds"])
    scores = tagger.evaluate(DATA / "dev.txt")
    backbone = getattr(tagger.config, "backbone", None)
    return {
        "name": name,
        "model": model_dir,
        "dev_f1": scores.micro.f1,
        "seconds_to_best": to_best,
        "context": getattr(backbone, "context", 0),
        "fine_tuned": bool(getattr(backbone, "finetune", False)),
    }, tagger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("models", nargs="*", help="NAME=DIR: bistack models to put beside")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, help="the first N sentences only (a quick check)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not (DATA / "dev.txt").is_file():
        raise SystemExit(f"{DATA} is missing: this benchmark needs ../shared/data/conll2003")
    dev = read_conll(DATA / "dev.txt")[: args.limit]
    texts = [" ".join(s.tokens) for s in dev]
    words = sum(len(s.tokens) for s in dev)
    result: dict = {"epochs": args.epochs, "threads": args.threads, "dev_words": words}
    result["hf"] = fine_tune(args.epochs, args.limit)
    print(json.dumps(result["hf"]), flush=True)

    from transformers import pipeline

    tagger = pipeline(
        "token-classification", model=str(OUTPUT / "best"), aggregation_strategy="first",
        device="cpu",
    )  # fmt: skip
    result["hf"] |= prediction_rows("hf", lambda batch: tagger(batch, batch_size=32), texts, words)
    result["bistack"] = []
    for pair in args.models:
        name, _, model_dir = pair.partition("=")
        row, model = bistack_row(name, model_dir)
        row |= prediction_rows(name, model.predict, texts, words)
        result["bistack"].append(row)
        print(json.dumps(row), flush=True)
    if args.limit:  # a quick check: nothing to keep
        print(report(result, args))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hf-peer.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "hf-peer.md").write_text(report(result, args))
    print(report(result, args))


def report(result: dict, args: argparse.Namespace) -> str:
    hf = result["hf"]
    models = " ".join(args.models)
    lines = [
        "# all-MiniLM-L6-v2 fine-tuned by HuggingFace's recipe, beside bistack's taggers",
        "",
        f"Reproduce: `make hf-peer && HF_HUB_OFFLINE=1 .venv-hf-peer/bin/python "
        f"benchmarks/hf_token_classification.py --epochs {args.epochs} --threads "
        f"{args.threads} {models}`. CoNLL-2003 dev ({result['dev_words']} words), entity F1 as "
        "conlleval scores it (bistack's scorer for every row); the HF model's tags are read at "
        "each word's first subword. Words/s: the dev sentences as raw text, "
        "`pipeline('token-classification', aggregation_strategy='first')` for the HF model "
        "and `predict` for bistack's, in one process, one after the other; peak RSS is the "
        "process's so far (the HF model's training ran first in it). "
        f"{args.threads} threads.",
        "",
        "| model | dev F1 | training to the best epoch | words/s, batch 1 | words/s, batch 32 "
        "| p50 latency, one sentence | peak RSS so far |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| HF token classification (fine-tuned, {args.epochs} epochs; best: epoch "
        f"{hf['best_epoch']:.0f}) | {hf['dev_f1']:.2f} | {hf['seconds_to_best']:.0f} s | "
        f"{hf['words_per_s_batch1']:,.0f} | {hf['words_per_s_batch32']:,.0f} | "
        f"{hf['p50_ms']:.2f} ms | {hf['peak_rss_mb_so_far']:,.0f} MB |",
    ]
    for row in result["bistack"]:
        to_best = f"{row['seconds_to_best']:.0f} s" if row["seconds_to_best"] else "-"
        lines.append(
            f"| bistack {row['name']} | {row['dev_f1']:.2f} | {to_best} | "
            f"{row['words_per_s_batch1']:,.0f} | {row['words_per_s_batch32']:,.0f} | "
            f"{row['p50_ms']:.2f} ms | {row['peak_rss_mb_so_far']:,.0f} MB |"
        )
    lines += [
        "",
        f"HF per-epoch dev F1: {', '.join(f'{f:.2f}' for f in hf['per_epoch_f1'])}; training "
        f"{hf['train_seconds']:.0f} s in all; dev words the {MAX_LENGTH}-subword truncation "
        f"dropped (tagged O): {hf['truncated_dev_words']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
