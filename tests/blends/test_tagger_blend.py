"""Taggers blend as one CRF: a tagger CV keeps its out-of-fold log-potentials (each sentence's
emissions and its fold's CRF), and ``bistack blend`` of tagger CVs weights them, the weighted sum
decoded exactly by Viterbi (at weight 1 on one run: that run's folds' tags and its CV score),
the weights searched by out-of-fold entity F1 (a grid over the simplex, or the greedy
selection), scored nested, with the verdict; the blend opens as one tagger in every outlet."""

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
from bistack.folds.weights import blended
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


def test_a_tagger_cv_keeps_its_out_of_fold_potentials_and_its_folds_crfs(tagger_cvs):
    runs, _ = tagger_cvs
    saved = load_file(runs[0] / "oof_potentials.safetensors")
    records = [json.loads(line) for line in (runs[0] / "oof.jsonl").read_text().splitlines()]
    lengths = [len(record["gold"]) for record in records]
    assert saved["offsets"].tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()
    assert saved["fold"].tolist() == [record["fold"] for record in records]
    assert saved["transitions"].shape[0] == FOLDS


def oof_tags(run: Path) -> list[list[str]]:
    """The tags the run's folds gave their held-out sentences (``oof.conll``'s last column)."""
    sentences = (run / "oof.conll").read_text().strip("\n").split("\n\n")
    return [[line.split(" ")[2] for line in s.splitlines()] for s in sentences]


@pytest.mark.parametrize("run", [0, 1])
def test_a_blend_at_weight_one_tags_as_the_runs_folds_did_and_scores_its_cv(tagger_cvs, run):
    from bistack.blends.runs import read_run

    cv = read_run(tagger_cvs[0][run], "run")
    part = cv.part
    assert part.paths(blended(np.array([1.0, 0.0]), np.stack([part.predictions] * 2))) == (
        oof_tags(tagger_cvs[0][run])
    )
    assert part.score(part.predictions) == float(cv.summary["cv"])  # exactly


def test_a_tagger_cv_blended_with_a_copy_of_itself_scores_its_own_cv(tagger_cvs, tmp_path):
    runs, _ = tagger_cvs
    copy = tmp_path / "copy"
    shutil.copytree(runs[0], copy)
    said: list[str] = []
    result = bistack.blend([runs[0], copy], tmp_path / "blend", say=said.append)
    cv = json.loads((runs[0] / "cv.json").read_text())["cv"]
    assert result.nested == cv and result.in_sample == cv
    assert result.verdict["difference"] == 0.0 and not result.verdict["beyond_noise"]
    assert f"{cv:.4f}" in next(line for line in said if line.startswith(runs[0].name))


def test_tagger_cvs_blend_by_out_of_fold_entity_f1(tagger_cvs, capsys):
    runs, root = tagger_cvs
    result = bistack.blend(runs, root / "blend")
    record = json.loads((root / "blend" / "blend.json").read_text())
    assert record["metric"] == "f1" and "entity F1" in record["objective"]
    assert set(record["scores"]) == {"nested", "in_sample", "nested_by_fold"}
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


def test_a_run_whose_potentials_say_nothing_gets_weight_zero(tagger_cvs, tmp_path):
    runs, _ = tagger_cvs
    flat = tmp_path / "flat"
    shutil.copytree(runs[0], flat)
    file = flat / "oof_potentials.safetensors"
    saved = load_file(file)
    with safe_open(str(file), framework="numpy") as opened:  # the metadata kept as written
        metadata = opened.metadata()
    nothing = {
        name: np.zeros_like(saved[name]) for name in ("emissions", "transitions", "start", "end")
    }
    save_file({**saved, **nothing}, file, metadata=metadata)
    result = bistack.blend([runs[1], flat], tmp_path / "blend", say=lambda _: None)
    assert result.weights == {runs[1].name: 1.0, "flat": 0.0}
    # The blend's model holds the run of weight 1 alone, tagging as its fold ensemble does.
    alone = open_model(runs[1] / "model")
    blend = open_model(tmp_path / "blend" / "model")
    texts = ["Paul praised Rome yesterday .", "Zeda visited Paris ."]
    assert [[t["tag"] for t in p.to_json()["tokens"]] for p in blend.predict(texts)] == [
        [t["tag"] for t in p.to_json()["tokens"]] for p in alone.predict(texts)
    ]


def test_a_tagger_cv_without_potentials_or_with_edited_ones_is_refused_by_name(
    tagger_cvs, tmp_path
):
    runs, _ = tagger_cvs
    old = tmp_path / "old"
    shutil.copytree(runs[0], old)
    (old / "oof_potentials.safetensors").unlink()
    with pytest.raises(ConfigError, match=r"oof_potentials\.safetensors: missing"):
        bistack.blend([runs[1], old], tmp_path / "b1", say=lambda _: None)
    edited = tmp_path / "edited"
    shutil.copytree(runs[0], edited)
    file = edited / "oof_potentials.safetensors"
    saved = load_file(file)
    save_file({**saved, "offsets": saved["offsets"][:-1]}, file, metadata={"tags": "{}"})
    with pytest.raises(ConfigError, match="not the out-of-fold potentials bistack cv wrote"):
        bistack.blend([runs[1], edited], tmp_path / "b2", say=lambda _: None)
    assert not (tmp_path / "b1").exists() and not (tmp_path / "b2").exists()


def test_a_tagger_blend_fits_its_own_temperature_nested_and_names_it(tagger_cvs):
    runs, root = tagger_cvs
    bistack.blend(runs, root / "calibrated", say=lambda _: None)
    record = json.loads((root / "calibrated" / "blend.json").read_text())
    ensemble = json.loads((root / "calibrated" / "model" / "ensemble.json").read_text())
    assert "fitted without it" in record["calibration"]["fitted_on"]
    if "out_of_fold_fit" in record:  # a temperature fitted: kept where the nested check says
        fit = record["out_of_fold_fit"]
        assert fit["kept"] == (fit["nested_log_loss_after"] < fit["nested_log_loss_before"])
        assert ("temperature" in ensemble["calibration"]) == fit["kept"]
        if fit["kept"]:
            assert ensemble["calibration"]["temperature"] == fit["temperature"]
            model = open_model(root / "calibrated" / "model")
            assert model.model.decoder.temperature == pytest.approx(fit["temperature"])
