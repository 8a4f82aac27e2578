"""``backbone.precision``: a frozen backbone's pass in bfloat16 where asked, keyed apart in the
feature cache, and the model predicting under it as it trained; refused for a fine-tuned one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bistack import tasks
from bistack.errors import ConfigError
from bistack.models.backbone import TransformerBackbone
from bistack.models.frozen_pass import FLOAT32, FrozenPass
from bistack.predictor import open_model
from bistack.runs.driver import RunOptions
from bistack.training import train_config
from tests.fixtures.written_models.make_fixtures import tiny_transformer
from tests.text_models.test_end_to_end import sentiment_rows, write_tsv

BFLOAT16 = FrozenPass("bf16-mixed")


def test_the_frozen_pass_runs_in_bfloat16_and_gives_float32_states(tmp_path):
    backbone = TransformerBackbone.load(str(tiny_transformer(tmp_path / "bb")))
    batch = backbone.tokenize(["a fine film", "a dull one"], "truncate")
    with torch.inference_mode():
        full = backbone.hidden_states(batch.input_ids, batch.attention_mask)
        half = backbone.hidden_states(batch.input_ids, batch.attention_mask, BFLOAT16)
        again = backbone.hidden_states(batch.input_ids, batch.attention_mask)
    assert not hasattr(backbone, "precision")  # no mode left on the backbone: a pass is told
    assert all(torch.equal(a, b) for a, b in zip(full, again, strict=True))
    assert all(state.dtype == torch.float32 for state in half)
    assert not torch.equal(full[-1], half[-1])  # computed in bfloat16
    assert torch.allclose(full[-1], half[-1], atol=0.1)


def config(tmp_path, precision: str, finetune: bool = False) -> dict:
    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(30, 0))
    return {
        "kind": "layer_classifier",
        "data": {"train": str(train), "dev": str(train), "text_column": "sentence",
                 "label_columns": ["label"]},
        "backbone": {"path": str(tiny_transformer(tmp_path / "bb")), "max_length": 16,
                     "cache_dir": str(tmp_path / "cache"), "precision": precision,
                     "finetune": finetune},
        "layer_pooling": {"type": "lstm", "lstm_hidden": 8},
        "train": {"max_epochs": 1},
    }  # fmt: skip


def test_a_model_keeps_its_precision_and_the_cache_keys_it_apart(tmp_path):
    trained = train_config(
        tasks.config_from_dict(config(tmp_path, "bf16-mixed")), tmp_path / "a", RunOptions()
    )
    model = open_model(trained.model_dir)
    assert model.model.config.backbone.precision == "bf16-mixed"
    assert len(list((tmp_path / "cache").iterdir())) == 1
    train_config(tasks.config_from_dict(config(tmp_path, "32")), tmp_path / "b", RunOptions())
    assert len(list((tmp_path / "cache").iterdir())) == 2  # a float32 store apart
    stage = model.model.layer_vectors(["a fine film"])
    again = model.model.backbone.layer_vectors(
        ["a fine film"], "truncate", max_length=16, frozen=BFLOAT16
    )
    assert torch.equal(stage.cls, again.cls)  # predicted as it trained: in bfloat16


def test_a_fine_tuned_backbone_refuses_the_frozen_pass_precision(tmp_path):
    with pytest.raises(ConfigError, match=r"backbone\.precision bf16-mixed is a frozen backbone"):
        tasks.config_from_dict(config(tmp_path, "bf16-mixed", finetune=True))


def test_a_bfloat16_model_predicts_as_it_trained_and_exports_in_float32(tmp_path):
    """Prediction runs the frozen pass at the model's precision (the vectors it trained on);
    the ONNX export runs its backbone in float32, within 5e-3 of the PyTorch model's
    probabilities (the documented tolerance)."""
    pytest.importorskip("onnxruntime", reason="the export needs bistack[onnx]")
    from bistack.cli import main

    trained = train_config(
        tasks.config_from_dict(config(tmp_path, "bf16-mixed")), tmp_path / "a", RunOptions()
    )
    model = open_model(trained.model_dir)
    texts = ["a fine film", "a dull and long one", "the best"]
    seen = []
    real = TransformerBackbone.hidden_states

    def spied(self, input_ids, attention_mask, frozen=FLOAT32):
        seen.append(frozen.precision)
        return real(self, input_ids, attention_mask, frozen)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransformerBackbone, "hidden_states", spied)
        torch_side = model.predict(texts)
    assert seen and set(seen) == {"bf16-mixed"}
    assert main(["export", str(trained.model_dir), "--output", str(tmp_path / "onnx")]) == 0
    exported = open_model(tmp_path / "onnx").predict(texts)
    for ours, theirs in zip(torch_side, exported, strict=True):
        for label, p in ours.probabilities.items():
            assert theirs.probabilities[label] == pytest.approx(p, abs=5e-3)


def test_predict_at_32_of_a_bfloat16_backbone_is_refused_naming_the_key(tmp_path, capsys):
    """``--precision 32`` cannot make the frozen pass of a model trained on bfloat16 vectors
    float32 without changing what its head reads: refused, naming backbone.precision; left
    out, the model predicts as it trained."""
    from bistack.cli import main

    trained = train_config(
        tasks.config_from_dict(config(tmp_path, "bf16-mixed")), tmp_path / "a", RunOptions()
    )
    for command in (["predict", str(trained.model_dir), "a fine film"],):
        assert main([*command, "--precision", "32"]) == 2
        err = capsys.readouterr().err
        assert "--precision 32:" in err and "backbone.precision" in err, err
        assert main(command) == 0
    train = tmp_path / "train.tsv"
    assert main(["evaluate", str(trained.model_dir), str(train), "--precision", "32"]) == 2
    assert "backbone.precision" in capsys.readouterr().err
    assert main(["evaluate", str(trained.model_dir), str(train), "--precision", "bf16-mixed"]) == 0


def test_a_shuffled_table_pays_no_backbone_pass_and_its_log_says_so(tmp_path):
    import random

    first = config(tmp_path, "32")
    train_config(tasks.config_from_dict(first), tmp_path / "a", RunOptions())
    rows = sentiment_rows(30, 0)
    random.Random(1).shuffle(rows)
    shuffled = write_tsv(tmp_path / "shuffled.tsv", rows)
    again = first | {"data": first["data"] | {"train": str(shuffled), "dev": str(shuffled)}}
    train_config(tasks.config_from_dict(again), tmp_path / "b", RunOptions())
    log = (tmp_path / "b" / "train.log").read_text()
    assert "per-layer vectors of 30 texts read from the cache" in log, log


def test_auto_settles_as_the_machine_runs_bfloat16_and_the_model_records_it(tmp_path, monkeypatch):
    """``backbone.precision`` left out is ``auto``: bf16-mixed where the machine runs bfloat16
    natively (this CPU's AVX-512 BF16 or AMX), 32 elsewhere and for a fine-tuned backbone; the
    model's config.json keeps what it settled at, so it predicts the same elsewhere."""
    import json

    import bistack.config.machine
    from tests.conftest import NATIVE_BFLOAT16

    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    native = "avx512_bf16" in cpuinfo or "amx_bf16" in cpuinfo
    if native:  # the CPU's own flags settle it, whatever GPU there is
        assert NATIVE_BFLOAT16()
    for machine, settled in ((True, "bf16-mixed"), (False, "32")):
        monkeypatch.setattr(
            bistack.config.machine, "native_bfloat16", lambda machine=machine: machine
        )
        data = config(tmp_path, "auto")
        del data["backbone"]["precision"]  # left out: auto
        assert tasks.config_from_dict(data).backbone.precision == settled
        tuned = config(tmp_path, "auto", finetune=True)
        assert tasks.config_from_dict(tuned).backbone.precision == "32"
    monkeypatch.setattr(bistack.config.machine, "native_bfloat16", NATIVE_BFLOAT16)
    data = config(tmp_path, "auto")
    del data["backbone"]["precision"]
    trained = train_config(tasks.config_from_dict(data), tmp_path / "run", RunOptions())
    written = json.loads((trained.model_dir / "config.json").read_text())
    expected = "bf16-mixed" if NATIVE_BFLOAT16() else "32"
    assert written["config"]["backbone"]["precision"] == expected
    if not native:
        pytest.skip("this CPU has no AVX-512 BF16 nor AMX: auto settled at 32, as it should")


def test_the_run_says_the_precision_auto_chose(tmp_path, monkeypatch):
    import bistack.config.machine

    monkeypatch.setattr(bistack.config.machine, "native_bfloat16", lambda: True)
    data = config(tmp_path, "auto")
    del data["backbone"]["precision"]
    train_config(tasks.config_from_dict(data), tmp_path / "run", RunOptions())
    assert "frozen, its pass in bf16-mixed" in (tmp_path / "run" / "train.log").read_text()
