"""Model and exported directories written by the code before each kind family had one home
(tests/fixtures/written_models, by commit 3e9def0) load, and predict and score exactly what that
code printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.files.test_legacy_models import assert_same, needs_backbone, printed

FIXTURES = Path(__file__).parents[1] / "fixtures" / "written_models"
MODELS = sorted(p.name for p in (FIXTURES / "models").iterdir() if p.is_dir())
EXPORTS = sorted(p.name for p in (FIXTURES / "exports").iterdir() if p.is_dir())


def check_prints_the_same(capsys, directory: Path, expected: dict) -> None:
    for key, want in expected.get("predict", {}).items():
        options = [] if key == "jsonl" else key.split()
        fmt = [] if "--format" in options else ["--format", "jsonl"]
        out = printed(capsys, ["predict", str(directory), *expected["texts"], *fmt, *options])
        if "--format" in options:
            assert out == want, key
        else:
            assert_same([json.loads(line) for line in out.splitlines()], want, key)
    data = FIXTURES / "data" / expected["evaluate_data"]
    scores = json.loads(printed(capsys, ["evaluate", str(directory), str(data), "--json"]))
    assert_same(scores, expected["evaluate"])


def test_there_is_a_model_of_every_kind_and_an_export_of_every_kind_that_exports():
    from bistack.tasks import TASKS

    assert set(MODELS) == set(TASKS)
    exported = {json.loads((FIXTURES / "exports" / name / "export.json").read_text())["kind"]
                for name in EXPORTS}  # fmt: skip
    assert exported == {kind for kind, task in TASKS.items() if task.exporting is not None}


@pytest.mark.parametrize("name", MODELS)
def test_a_model_directory_predicts_and_scores_as_it_did(name, tmp_path, capsys):
    needs_backbone(name)
    model_dir = shutil.copytree(FIXTURES / "models" / name, tmp_path / name)
    before = {p.name: p.read_bytes() for p in model_dir.iterdir()}
    expected = json.loads((FIXTURES / "models" / f"{name}.expected.json").read_text())
    check_prints_the_same(capsys, model_dir, expected)
    assert {p.name: p.read_bytes() for p in model_dir.iterdir()} == before


@pytest.mark.parametrize("name", EXPORTS)
def test_an_exported_directory_predicts_and_scores_as_it_did(name, tmp_path, capsys):
    pytest.importorskip("onnxruntime", reason="exported models need the onnx extra")
    exported = shutil.copytree(FIXTURES / "exports" / name, tmp_path / name)
    before = {p.name: p.read_bytes() for p in exported.iterdir()}
    expected = json.loads((FIXTURES / "exports" / f"{name}.expected.json").read_text())
    check_prints_the_same(capsys, exported, expected)
    assert {p.name: p.read_bytes() for p in exported.iterdir()} == before


@pytest.mark.parametrize("name", ["layer_tagger", "layer_classifier", "layer_regressor"])
def test_a_frozen_backbone_the_caller_holds_is_joined_only_when_it_is_the_one_named(name, tmp_path):
    """A study or a run that holds the frozen backbone a model names loads the model around it
    (no second copy read from disk) and predicts alike; a backbone with other files is refused
    as the one named would be when changed."""
    needs_backbone(name)
    from bistack.errors import ModelFileError
    from bistack.models.backbone import TransformerBackbone
    from bistack.predictor import card_of
    from tests.fixtures.written_models.make_fixtures import tiny_transformer

    directory = FIXTURES / "models" / name
    loader = card_of(directory).loader_class
    texts = json.loads((FIXTURES / "models" / f"{name}.expected.json").read_text())["texts"]
    held = TransformerBackbone.load("default")
    joined = loader.load(directory, backbone=held)
    assert joined.backbone is held
    alone = loader.load(directory)
    assert alone.backbone is not held
    assert_same([p.to_json() for p in joined.predict(texts)],
                [p.to_json() for p in alone.predict(texts)])  # fmt: skip
    other = TransformerBackbone.load(str(tiny_transformer(tmp_path / "other")))
    with pytest.raises(ModelFileError, match="has changed since training"):
        loader.load(directory, backbone=other)
