"""The Flair 0.15.1 side of ``make bench``: the same steps on the same sentences and batches.

Runs in the peer environment (``.venv-peers``: Flair needs transformers 4.x, bistack 5.x), so it
imports nothing from bistack. The model mirrors bistack's benchmark tagger: trainable word
embeddings of 100 (OneHotEmbeddings over the training vocabulary), Flair's character BiLSTM
(25/25), one BiLSTM layer of 256, CRF; no reprojection layer, Adam, gradient clipping at 5.

    .venv-peers/bin/python benchmarks/peers/flair_speed.py ITEM --plan PLAN.json [--threads N]

ITEM: train-bucketed, train-random, predict. Prints one JSON object, as speed_items.py does.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import sys
import time

import torch
from flair.data import Dictionary, Sentence
from flair.embeddings import CharacterEmbeddings, OneHotEmbeddings, StackedEmbeddings
from flair.models import SequenceTagger


def spans(tags: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, type) of the entities in IOB1 or BIO tags."""
    found, start, kind = [], None, None
    for index, tag in enumerate([*tags, "O"]):
        prefix, _, label = tag.partition("-")
        if start is not None and (prefix != "I" or label != kind):
            found.append((start, index, kind))
            start = None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = index, label
    return found


def labelled(tokens: list[str], tags: list[str]) -> Sentence:
    sentence = Sentence(tokens)
    for start, end, kind in spans(tags):
        sentence[start:end].add_label("ner", kind)
    return sentence


def build_tagger(plan: dict) -> SequenceTagger:
    torch.manual_seed(0)
    words = Dictionary(add_unk=True)
    chars = Dictionary(add_unk=True)
    for tokens in plan["tokens"]:
        for token in tokens:
            words.add_item(token)
            for char in token:
                chars.add_item(char)
    types = Dictionary(add_unk=False)
    for tags in plan["tags"]:
        for _, _, kind in spans(tags):
            types.add_item(kind)
    types.span_labels = True
    embeddings = StackedEmbeddings(
        [
            OneHotEmbeddings(words, embedding_length=100),
            CharacterEmbeddings(chars, char_embedding_dim=25, hidden_size_char=25),
        ]
    )
    return SequenceTagger(
        hidden_size=256,
        embeddings=embeddings,
        tag_dictionary=types,
        tag_type="ner",
        use_crf=True,
        reproject_embeddings=False,
    )


def train_item(plan: dict, which: str, quick: bool) -> list[dict]:
    tagger = build_tagger(plan)
    sentences = [labelled(t, g) for t, g in zip(plan["tokens"], plan["tags"], strict=True)]
    optimizer = torch.optim.Adam(tagger.parameters(), lr=0.002)
    tagger.train()
    total, tokens = 0.0, 0
    for number, indices in enumerate(plan[f"{which}_batches"][: 12 if quick else None]):
        batch = [sentences[i] for i in indices]
        start = time.perf_counter()
        optimizer.zero_grad()
        loss, _ = tagger.forward_loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tagger.parameters(), 5.0)
        optimizer.step()
        for sentence in batch:  # what Flair's trainer does with embeddings_storage_mode="none"
            sentence.clear_embeddings()
        elapsed = time.perf_counter() - start
        if number >= 3:
            total += elapsed
            tokens += sum(len(sentence) for sentence in batch)
    return [{"item": f"train-{which}", "tokens": tokens, "flair_tokens_per_s": tokens / total}]


def predict_item(plan: dict, quick: bool) -> list[dict]:
    tagger = build_tagger(plan)
    tagger.eval()
    token_lists = plan["predict_tokens"][: 500 if quick else None]
    rows = []
    for batch_size in (32, 256):
        times = []
        for _ in range(1 if quick else 3):
            sentences = [Sentence(tokens) for tokens in token_lists]
            start = time.perf_counter()
            tagger.predict(sentences, mini_batch_size=batch_size)
            times.append(time.perf_counter() - start)
        rows.append(
            {
                "item": f"predict-{batch_size}",
                "sentences": len(token_lists),
                "flair_sentences_per_s": len(token_lists) / statistics.median(times),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("item", choices=["train-bucketed", "train-random", "predict"])
    parser.add_argument("--plan", required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    logging.getLogger("flair").setLevel(logging.WARNING)
    torch.set_num_threads(args.threads)
    with open(args.plan, encoding="utf-8") as file:
        plan = json.load(file)
    if args.item == "predict":
        rows = predict_item(plan, args.quick)
    else:
        rows = train_item(plan, args.item.removeprefix("train-"), args.quick)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    json.dump({"rows": rows, "peak_rss_mb": peak}, sys.stdout)


if __name__ == "__main__":
    main()
