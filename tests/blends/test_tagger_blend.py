"""Taggers blend: a tagger CV keeps its out-of-fold token marginals, and ``bistack blend`` of
tagger CVs weights them, the weighted mean decoded under the scheme's constraints as the tagger
ensemble decodes its mean, the weights searched by out-of-fold entity F1 (a grid over the
simplex, or the greedy selection), scored nested, with the verdict; the blend opens as one
tagger in every outlet."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import bistack
from bistack.cli import main
from bistack.errors import ConfigError
from bistack.predictor import open_model
from tests.conftest import tiny_config
from tests.cv.test_cross_validation import write_documents

FOLDS = 3


@pytest.fixture(scope="module")
def tagger_cvs(tmp_path_factory) -> tuple[list[Path], Path]:
    """Two CVs of one CoNLL file, one split: taggers of two widths."""
    root = tmp_path_factory.mktemp("tagger-blend")
    train = write_documents(root / "train.txt", 6, 12, noise=0.2, own_names=True)
    runs = []
    for width in (16, 24):
        config = tiny_config(
            train, None, encoder={"hidden_size": width}, train={"max_epochs": 4, "patience": 4}
        )
        bistack.cross_validate(config, root / f"w{width}", folds=FOLDS, say=lambda _: None)
        runs.append(root / f"w{width}")
    return runs, root


def test_a_tagger_cv_keeps_its_out_of_fold_token_marginals(tagger_cvs):
    runs, _ = tagger_cvs
    saved = load_file(runs[0] / "oof_marginals.safetensors")
    records = [json.loads(line) for line in (runs[0] / "oof.jsonl").read_text().splitlines()]
    lengths = [len(record["gold"]) for record in records]
    assert saved["offsets"].tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()
    np.testing.assert_allclose(saved["marginals"].sum(axis=1), 1.0, atol=1e-4)


def test_tagger_cvs_blend_by_out_of_fold_entity_f1(tagger_cvs, capsys):
    runs, root = tagger_cvs
    result = bistack.blend(runs, root / "blend")
    record = json.loads((root / "blend" / "blend.json").read_text())
    assert record["metric"] == "f1" and "entity F1" in record["objective"]
    assert set(record["scores"]) == {"nested", "in_sample"}
    assert record["verdict"]["says"].startswith("the nested blend")
    weights = list(result.weights.values())
    assert sum(weights) == pytest.approx(1.0)
    assert all(abs(w * 10 - round(w * 10)) < 1e-9 for w in weights)  # the grid's step, 0.1
    for fold_weights in record["nested_weights"].values():  # each fold's own search
        assert sum(fold_weights.values()) == pytest.approx(1.0)
    # The blend tags as one tagger (predict, and info saying what it is), exported too.
    model = open_model(root / "blend" / "model")
    texts = ["Paul praised Rome yesterday .", "Zeda visited Paris ."]
    tagged = [[t["tag"] for t in p.to_json()["tokens"]] for p in model.predict(texts)]
    assert len(tagged) == 2
    assert "blend of" in model.description
    pytest.importorskip("onnxruntime", reason="exporting needs bistack[onnx]")
    assert main(["export", str(root / "blend" / "model"), "--output", str(root / "exported")]) == 0
    exported = open_model(root / "exported")
    assert [[t["tag"] for t in p.to_json()["tokens"]] for p in exported.predict(texts)] == tagged
    greedy = bistack.blend(runs, root / "greedy", method="greedy", rounds=10)
    assert sum(greedy.weights.values()) == pytest.approx(1.0)


def test_a_run_whose_marginals_say_nothing_gets_weight_zero(tagger_cvs, tmp_path):
    runs, _ = tagger_cvs
    flat = tmp_path / "flat"
    shutil.copytree(runs[0], flat)
    file = flat / "oof_marginals.safetensors"
    saved = load_file(file)
    with safe_open(str(file), framework="numpy") as opened:  # the metadata kept as written
        metadata = opened.metadata()
    uniform = np.full_like(saved["marginals"], 1.0 / saved["marginals"].shape[1])
    save_file({**saved, "marginals": uniform}, file, metadata=metadata)
    result = bistack.blend([runs[1], flat], tmp_path / "blend", say=lambda _: None)
    assert result.weights == {runs[1].name: 1.0, "flat": 0.0}
    # The blend's model holds the run of weight 1 alone, tagging as its fold ensemble does.
    alone = open_model(runs[1] / "model")
    blend = open_model(tmp_path / "blend" / "model")
    texts = ["Paul praised Rome yesterday .", "Zeda visited Paris ."]
    assert [[t["tag"] for t in p.to_json()["tokens"]] for p in blend.predict(texts)] == [
        [t["tag"] for t in p.to_json()["tokens"]] for p in alone.predict(texts)
    ]


def test_a_tagger_cv_without_marginals_or_with_edited_ones_is_refused_by_name(tagger_cvs, tmp_path):
    runs, _ = tagger_cvs
    old = tmp_path / "old"
    shutil.copytree(runs[0], old)
    (old / "oof_marginals.safetensors").unlink()
    with pytest.raises(ConfigError, match=r"oof_marginals\.safetensors: missing"):
        bistack.blend([runs[1], old], tmp_path / "b1", say=lambda _: None)
    edited = tmp_path / "edited"
    shutil.copytree(runs[0], edited)
    file = edited / "oof_marginals.safetensors"
    saved = load_file(file)
    save_file({**saved, "offsets": saved["offsets"][:-1]}, file, metadata={"tags": "{}"})
    with pytest.raises(ConfigError, match="not the out-of-fold marginals bistack cv wrote"):
        bistack.blend([runs[1], edited], tmp_path / "b2", say=lambda _: None)
    assert not (tmp_path / "b1").exists() and not (tmp_path / "b2").exists()
