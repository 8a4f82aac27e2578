"""The Flair 0.15.1 side of ``benchmarks/flair_side_by_side.py``: bistack's stacked tagger as
Flair builds it. The frozen encoder's last four layers, each word the mean of its subwords,
with 64 tokens of the document around it (``TransformerWordEmbeddings``), stacked with
trainable word embeddings of 100 (``OneHotEmbeddings``) and Flair's character BiLSTM (25/25),
read by one BiLSTM layer and a CRF; no reprojection, locked dropout 0.5 as bistack's outer
dropout, Adam, gradient clipping at 5 (Flair's trainer's own), the embeddings kept after their
first pass (``embeddings_storage_mode="cpu"``: the encoder runs once a sentence, as bistack's
cache makes it).

Runs in the peer environment (``.venv-peers``: Flair needs transformers 4.x), so it imports
nothing from bistack:

    HF_HUB_OFFLINE=1 .venv-peers/bin/python benchmarks/peers/flair_layers.py \
        --train CUT.txt --dev DEV.txt --backbone sentence-transformers/all-mpnet-base-v2 \
        --epochs 15 --batch-size 32 --lr 0.002 --hidden 200 --output OUT.json

Prints and writes one JSON object: dev F1 (Flair's micro-averaged span F1, the entity F1 of
CoNLL) of the best epoch's model and the seconds training took (the encoder's pass included),
with the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import tempfile
import time
from pathlib import Path

import torch
from flair.data import Corpus, Dictionary, Sentence
from flair.embeddings import (
    CharacterEmbeddings,
    OneHotEmbeddings,
    StackedEmbeddings,
    TransformerWordEmbeddings,
)
from flair.models import SequenceTagger
from flair.trainers import ModelTrainer
from flair_speed import labelled


def read_conll(path: Path) -> list[Sentence]:
    """CoNLL-2003 (token first, NER tag last), each sentence linked to its document's
    neighbours, as Flair's ColumnCorpus links them: ``use_context`` reads them, in training as
    in evaluation (unlinked, Flair's predict links a list in its order, so a model trained
    without context would be scored with it)."""
    documents: list[list[Sentence]] = [[]]
    tokens: list[str] = []
    tags: list[str] = []
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if tokens:
                documents[-1].append(labelled(tokens, tags))
            if parts:
                documents.append([])
            tokens, tags = [], []
            continue
        tokens.append(parts[0])
        tags.append(parts[-1])
    for document in documents:
        Sentence.set_context_for_sentences(document)
    return [sentence for document in documents for sentence in document]


def build_tagger(train: list[Sentence], backbone: str, hidden: int) -> SequenceTagger:
    torch.manual_seed(1)
    words = Dictionary(add_unk=True)
    chars = Dictionary(add_unk=True)
    types = Dictionary(add_unk=False)
    for sentence in train:
        for token in sentence:
            words.add_item(token.text)
            for char in token.text:
                chars.add_item(char)
        for span in sentence.get_spans("ner"):
            types.add_item(span.tag)
    types.span_labels = True
    transformer = TransformerWordEmbeddings(
        backbone,
        layers="-1,-2,-3,-4",
        subtoken_pooling="mean",
        layer_mean=False,
        fine_tune=False,
        use_context=64,
    )
    embeddings = StackedEmbeddings(
        [
            transformer,
            OneHotEmbeddings(words, embedding_length=100),
            CharacterEmbeddings(chars, char_embedding_dim=25, hidden_size_char=25),
        ]
    )
    return SequenceTagger(
        hidden_size=hidden,
        embeddings=embeddings,
        tag_dictionary=types,
        tag_type="ner",
        use_crf=True,
        reproject_embeddings=False,
        dropout=0.0,
        word_dropout=0.0,
        locked_dropout=0.5,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--dev", type=Path, required=True)
    parser.add_argument("--backbone", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    logging.getLogger("flair").setLevel(logging.WARNING)
    torch.set_num_threads(args.threads)
    train, dev = read_conll(args.train), read_conll(args.dev)
    corpus = Corpus(train, dev, None, sample_missing_splits=False)
    start = time.perf_counter()
    tagger = build_tagger(train, args.backbone, args.hidden)
    with tempfile.TemporaryDirectory() as folder:
        trainer = ModelTrainer(tagger, corpus)
        trainer.train(
            folder,
            learning_rate=args.lr,
            mini_batch_size=args.batch_size,
            max_epochs=args.epochs,
            optimizer=torch.optim.Adam,
            patience=args.epochs,  # no annealing: bistack's decay is its own (the table says)
            embeddings_storage_mode="cpu",
            create_file_logs=False,
        )
        seconds = time.perf_counter() - start
        best = Path(folder) / "best-model.pt"
        final = SequenceTagger.load(best) if best.exists() else tagger
        scored = final.evaluate(dev, gold_label_type="ner", mini_batch_size=64)
    row = {
        "dev_f1": round(100 * scored.main_score, 2),
        "train_seconds": round(seconds, 1),
        "sentences": len(train),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "threads": args.threads,
        "flair_settings": {
            "epochs": args.epochs,
            "mini_batch_size": args.batch_size,
            "learning_rate": args.lr,
            "hidden_size": args.hidden,
            "optimizer": "Adam",
            "max_grad_norm": 5.0,
            "locked_dropout": 0.5,
            "encoder_precision": "float32",
        },
    }
    args.output.write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
