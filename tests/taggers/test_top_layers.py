"""A tagger over a transformer's layers with its top K layers trained (``backbone.finetune: K``):
its frozen bottom (each sentence's subword rows with their document context, and its words'
frozen-layer states) cached once, each step running the K layers from it and forming the word
states as the whole pass does; the layer tagger and the stacked tagger alike."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from bistack import tasks
from bistack.data.conll import Sentence
from bistack.data.word_rows import sentence_contexts
from bistack.models.backbone import TransformerBackbone
from bistack.models.frozen_pass import FLOAT32
from bistack.models.word_pieces import tokenize_words, word_layer_states
from bistack.runs.driver import RunOptions
from bistack.runs.loop import start_run
from bistack.taggers.boundary import TaggerBottom
from bistack.tasks import task_of
from bistack.training import train_config
from tests.conftest import tiny_sentences, write_conll
from tests.fixtures.written_models.make_fixtures import tiny_transformer
from tests.text_models.test_layer_end_to_end import STACKED, recorded_best

pytest.importorskip("transformers", reason="the layer taggers need bistack[transformers]")


def tagger(tmp_path, top, precision="32", **sections) -> dict:
    train = write_conll(tmp_path / "train.txt", tiny_sentences(24, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(8, seed=1))
    return {
        "kind": "layer_tagger",
        "data": {"train": str(train), "dev": str(dev)},
        "backbone": {
            "path": str(tiny_transformer(tmp_path / "bb", 3)),
            "cache_dir": str(tmp_path / "cache"),
            "finetune": top,
            "lr": 1e-3,
            "context": 6,
            "precision": precision,
        },
        "encoder": {"hidden_size": 16, "outer_dropout": 0.1},
        "optimizer": {"name": "adam", "lr": 0.01},
        "train": {"batch_size": 8, "max_epochs": 2, "patience": 2},
    } | sections


@pytest.mark.parametrize("alignment", ["first", "mean", "last"])
def test_the_cached_bottom_and_the_top_layers_give_the_whole_pass_word_states(tmp_path, alignment):
    """Every word's state in every layer, from the cached bottom (kept in float16) and the top
    layers run now, is the whole encoder's, sentences read with their documents' context and a
    long one cut into rows between words."""
    config = tasks.config_from_dict(tagger(tmp_path, 1, subwords=alignment))
    config.backbone.max_length = 12
    backbone = TransformerBackbone.load(config.backbone.path)
    words = [["John", "visited", "Paris", "."], [f"word{i}" for i in range(14)], ["He", "left"]]
    sentences = [Sentence(tuple(w), ("O",) * len(w), line=i + 1, document=0)
                 for i, w in enumerate(words)]  # fmt: skip
    bottom = TaggerBottom(backbone, 2, config, sentences, FLOAT32, lambda _: None)
    with torch.no_grad():
        cached = bottom.batch([2, 0, 1]).word_layers(backbone, alignment)
        chosen = [sentences[i] for i in (2, 0, 1)]
        contexts = sentence_contexts(sentences, 6)
        around = [contexts[i] for i in (2, 0, 1)]
        pieces = tokenize_words(backbone, [s.tokens for s in chosen], 12, around, 6)
        whole = word_layer_states(backbone, pieces, alignment)
    assert cached.shape == whole.shape == (20, 3, 16)
    torch.testing.assert_close(cached, whole, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize(
    ("precision", "stacked"), [("32", False), ("bf16-mixed", True)], ids=["32", "bf16-stacked"]
)
def test_a_top_k_tagger_trains_its_top_layers_alone_and_tags_as_it_trained(
    tmp_path, precision, stacked
):
    from safetensors.torch import load_file

    config = tagger(tmp_path, 1, precision, **(STACKED if stacked else {}))
    trained = train_config(tasks.config_from_dict(config), tmp_path / "run", RunOptions())
    log = (tmp_path / "run" / "train.log").read_text()
    assert "the frozen bottom (layers 1-2) of 24 sentences computed and cached" in log
    assert "its top 1 layers fine-tuned" in log
    before = load_file(str(tmp_path / "bb" / "model.safetensors"))
    after = load_file(str(trained.model_dir / "top_layers.safetensors"))
    assert sorted(after) == sorted(name for name in before if ".layer.2." in name)
    assert any(not torch.equal(before[name], after[name]) for name in after)
    # A fresh process, no cache: the whole encoder tags dev as training scored it.
    best = max(recorded_best(tmp_path / "run", "dev_f1"))
    script = (
        "import json; from bistack.predictor import open_model;"
        f"m = open_model({str(trained.model_dir)!r});"
        f"print(json.dumps(m.evaluate({str(tmp_path / 'dev.txt')!r}).to_json()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    scores = json.loads(done.stdout.strip().splitlines()[-1])
    assert scores["f1"] == pytest.approx(best, abs=1e-6), (scores, best)
    again = train_config(tasks.config_from_dict(config), tmp_path / "again", RunOptions())
    assert (
        "of 24 sentences read from the cache" in (again.model_dir.parent / "train.log").read_text()
    )


def test_dev_is_scored_from_its_cached_bottom_as_the_whole_pass_scores_it(tmp_path, monkeypatch):
    """Each validation of a top-K tagger runs the top layers from dev's cached bottom, not the
    whole encoder: its word states are the whole pass's (within float16's rounding), and so is
    its score."""
    config = tasks.config_from_dict(tagger(tmp_path, 1, subwords="mean"))
    run = start_run(tmp_path / "run", 1, devices=1, strategy="auto", accelerator="cpu")
    prepared = task_of(config.kind).prepare(config, run)
    task, tagger_model = prepared.loop, prepared.model
    assert task.dev_bottom is not None and len(task.dev_bottom.sentences) == 8
    with torch.no_grad():
        for layer in tagger_model.backbone.model.encoder.layer[2:]:  # the top layer trained
            for weight in layer.parameters():
                weight.add_(0.05 * torch.randn_like(weight))
    cached = task.dev_bottom.word_states("mean")
    sentences = [s.tokens for s in task.data.dev]
    contexts = sentence_contexts(task.data.dev, config.backbone.context)
    whole = tagger_model.word_states(sentences, contexts)
    assert cached.dtype == torch.float16 and cached.shape == whole.shape
    # float16's rounding of the bottom, carried through the trained layer: a small share
    assert (cached.float() - whole).norm() / whole.norm() < 5e-3
    documents = [s.document for s in task.data.dev]
    tags = tagger_model.tag_tokens(sentences, documents=documents)
    assert tagger_model.tag_tokens(sentences, documents=documents, states=cached) == tags
    direct = tagger_model.score(task.data.dev, task.data.dev_source).micro.f1
    monkeypatch.setattr(tagger_model, "word_states", forbidden)  # no whole pass at validation
    assert task.evaluate().score == pytest.approx(direct, abs=1e-9)


def forbidden(*args, **kwargs):
    raise AssertionError("the whole encoder ran")


def test_a_tagger_cross_validation_pays_for_the_bottom_pass_once(tmp_path):
    """Every fold of a top-K tagger's CV reads the sentences' bottom from one cache: each
    sentence's bottom is computed by the first fold that trains on it, read by the others."""
    import re

    import bistack
    from tests.cv.test_cross_validation import write_documents

    config = tagger(tmp_path, 1)
    config["data"] = {"train": str(write_documents(tmp_path / "docs.txt", 6, 6)), "dev": None}
    bistack.cross_validate(config, tmp_path / "cv", folds=3, say=lambda _: None)
    computed = 0
    for fold in range(3):
        log = (tmp_path / "cv" / "folds" / f"fold{fold}" / "train.log").read_text()
        lines = [x for x in log.splitlines() if x.startswith("the frozen bottom")]
        assert len(lines) == 2, lines  # its training sentences', then its dev's
        for line in lines:
            total = int(re.search(r"of (\d+) sentences", line).group(1))
            if "read from the cache, " in line:
                computed += int(re.search(r"cache, (\d+) computed", line).group(1))
            elif "computed and cached" in line:
                computed += total
        assert fold > 0 or "computed and cached" in lines[0], lines
    assert computed == 36  # the file's sentences, each once (6 documents of 6)
    assert (tmp_path / "cv" / "model").is_dir()
