"""The Flair 0.15.1 side of ``benchmarks/flair_side_by_side.py``: bistack's stacked tagger as
Flair builds it. The frozen encoder's last four layers, each word the mean of its subwords,
with 64 tokens of the document around it (``TransformerWordEmbeddings``), stacked with
trainable word embeddings of 100 (``OneHotEmbeddings``) and Flair's character BiLSTM (25/25),
read by one BiLSTM layer and a CRF; no reprojection, locked dropout 0.5 as bistack's outer
dropout, gradient clipping at 5 (Flair's trainer's own). The encoder runs once a sentence, as
bistack's cache makes it: every sentence is embedded first (timed) and the embeddings are kept
(``embeddings_storage_mode="cpu"``), so each recipe trains over the same vectors:
``adam:LR`` (bistack's optimizer, no annealing) and ``sgd:LR`` (Flair's own tagger recipe:
plain SGD, the rate halved after 3 epochs without a better dev score).

Runs in the peer environment (``.venv-peers``: Flair needs transformers 4.x), so it imports
nothing from bistack:

    HF_HUB_OFFLINE=1 .venv-peers/bin/python benchmarks/peers/flair_layers.py \
        --train CUT.txt --dev DEV.txt --backbone sentence-transformers/all-mpnet-base-v2 \
        --epochs 15 --batch-size 32 --recipes adam:0.002 sgd:0.1 --hidden 200 --output OUT.json

Prints and writes one JSON object: the encoder pass's seconds, and for each recipe the dev F1
(Flair's micro-averaged span F1, the entity F1 of CoNLL) of the best epoch's model, each
epoch's dev F1 and the seconds its training took, with the peak RSS.
"""

from __future__ import annotations

import argparse
import csv
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


def build_tagger(
    train: list[Sentence], transformer: TransformerWordEmbeddings, hidden: int
) -> SequenceTagger:
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
    embeddings = StackedEmbeddings(
        [
            transformer,
            OneHotEmbeddings(words, embedding_length=100),
            CharacterEmbeddings(chars, char_embedding_dim=25, hidden_size_char=25),
        ],
        overwrite_names=False,  # renamed, the transformer's kept vectors would not be found
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


def embedded(
    sentences: list[Sentence], backbone: str, separator: bool
) -> TransformerWordEmbeddings:
    """The frozen encoder's vectors kept on every token (Flair reads them instead of running
    the encoder again while each recipe trains and is scored), computed in evaluation mode:
    left to Flair's first training epoch they would be computed in training mode (the
    encoder's dropout on, half the contexts dropped) and kept so, while dev is embedded
    without either. ``separator``: Flair's ``[FLERT]`` token around the sentence (its default;
    a new token whose embedding is random in a frozen encoder)."""
    transformer = TransformerWordEmbeddings(
        backbone,
        layers="-1,-2,-3,-4",
        subtoken_pooling="mean",
        layer_mean=False,
        fine_tune=False,
        use_context=64,
        use_context_separator=separator,
    )
    transformer.eval()
    with torch.no_grad():
        for first in range(0, len(sentences), 32):
            transformer.embed(sentences[first : first + 32])
    return transformer


def trained(
    corpus: Corpus, transformer: TransformerWordEmbeddings, recipe: str, args: argparse.Namespace
) -> dict:
    """One recipe's training (``adam:LR`` or ``sgd:LR``): its best dev F1, each epoch's, and
    the seconds it took."""
    name, rate = recipe.split(":")
    optimizers = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}
    # Adam: bistack's decay is its own (the table says), so no annealing; SGD: Flair's recipe
    patience = args.epochs if name == "adam" else 3
    start = time.perf_counter()
    tagger = build_tagger(list(corpus.train), transformer, args.hidden)
    with tempfile.TemporaryDirectory() as folder:
        ModelTrainer(tagger, corpus).train(
            folder,
            learning_rate=float(rate),
            mini_batch_size=args.batch_size,
            max_epochs=args.epochs,
            optimizer=optimizers[name],
            anneal_factor=0.5,
            patience=patience,
            embeddings_storage_mode="cpu",
            create_file_logs=False,
        )
        seconds = time.perf_counter() - start
        with (Path(folder) / "loss.tsv").open(encoding="utf-8") as log:
            epochs = [float(row["DEV_F1"]) for row in csv.DictReader(log, delimiter="\t")]
        best = Path(folder) / "best-model.pt"
        final = SequenceTagger.load(best) if best.exists() else tagger
        scored = final.evaluate(list(corpus.dev), gold_label_type="ner", mini_batch_size=64)
    return {
        "recipe": recipe,
        "optimizer": optimizers[name].__name__,
        "learning_rate": float(rate),
        "anneal": "none" if name == "adam" else "halved after 3 epochs without gain",
        "dev_f1": round(100 * scored.main_score, 2),
        "dev_f1_by_epoch": [round(100 * value, 2) for value in epochs],
        "train_seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--train", type=Path, required=True)
    parser.add_argument("--dev", type=Path, required=True)
    parser.add_argument("--backbone", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--recipes", nargs="+", default=["adam:0.002", "sgd:0.1"])
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument(
        "--context-separator", action=argparse.BooleanOptionalAction, default=True,
        help="Flair's [FLERT] token between a sentence and its context (Flair's default: on)",
    )  # fmt: skip
    args = parser.parse_args()
    for recipe in args.recipes:
        if recipe.split(":")[0] not in ("adam", "sgd") or recipe.count(":") != 1:
            parser.error(f"--recipes: {recipe!r} is not adam:RATE or sgd:RATE")
    logging.getLogger("flair").setLevel(logging.WARNING)
    torch.set_num_threads(args.threads)
    train, dev = read_conll(args.train), read_conll(args.dev)
    corpus = Corpus(train, dev, None, sample_missing_splits=False)
    start = time.perf_counter()
    transformer = embedded(train + dev, args.backbone, args.context_separator)
    encoder_seconds = time.perf_counter() - start
    runs = [trained(corpus, transformer, recipe, args) for recipe in args.recipes]
    row = {
        "encoder_seconds": round(encoder_seconds, 1),
        "runs": runs,
        "sentences": len(train),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "threads": args.threads,
        "flair_settings": {
            "epochs": args.epochs,
            "mini_batch_size": args.batch_size,
            "hidden_size": args.hidden,
            "max_grad_norm": 5.0,
            "locked_dropout": 0.5,
            "encoder_precision": "float32",
            "context_separator": args.context_separator,
        },
    }
    args.output.write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
