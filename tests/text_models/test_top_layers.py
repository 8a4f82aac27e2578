"""``backbone.finetune: K``: a transformer's top K layers trained over its frozen bottom, whose
output is cached once. A top-K forward from the cache equals the whole encoder's, for every
family the table calls (random weights where no checkpoint is at hand), and so do the top
layers' gradients; the bottom never changes; K equal to the encoder's layers is today's full
fine-tuning; a saved top-K model predicts from raw text, in a fresh process, as it did in
training."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers", reason="the layer models need bistack[transformers]")

from bistack import tasks
from bistack.errors import ConfigError
from bistack.models.boundary import frozen_bottom, top_layer_names
from bistack.models.top_layers import FAMILIES, top_states
from bistack.runs.driver import RunOptions
from bistack.training import train_config
from tests.fixtures.written_models.make_fixtures import tiny_transformer
from tests.text_models.test_end_to_end import sentiment_rows, write_tsv


def small(family: str):
    """A randomly initialised encoder of ``family``, 4 layers of 32."""
    import transformers

    sizes = {
        "vocab_size": 100,
        "hidden_size": 32,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 64,
    }
    made = {
        "bert": transformers.BertConfig(**sizes),
        "roberta": transformers.RobertaConfig(**sizes),
        "xlm-roberta": transformers.XLMRobertaConfig(**sizes),
        "electra": transformers.ElectraConfig(embedding_size=32, **sizes),
        "mpnet": transformers.MPNetConfig(**sizes),
        "deberta-v2": transformers.DebertaV2Config(
            relative_attention=True,
            pos_att_type=["p2c", "c2p"],
            position_buckets=8,
            max_relative_positions=16,
            norm_rel_ebd="layer_norm",
            share_att_key=True,
            conv_kernel_size=3,
            **sizes,
        ),
    }
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(made[family], attn_implementation="eager").eval()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_top_layers_from_the_boundary_are_the_whole_encoders(family):
    model = small(family)
    ids = torch.randint(5, 100, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:], mask[2, 3:] = 0, 0
    real = mask.bool()
    whole = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    for boundary in (1, 3):
        start = whole[boundary].detach().requires_grad_(False)
        top = top_states(model, boundary, start, mask)
        assert len(top) == 4 - boundary
        for got, want in zip(top, whole[boundary + 1 :], strict=True):
            torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)
    # The top layers' gradients, through the boundary's states, are the whole pass's.
    model.zero_grad()
    whole[-1][real].sum().backward()
    expected = {
        n: p.grad.clone() for n, p in model.named_parameters() if ".3." in n and p.grad is not None
    }
    model.zero_grad()
    with torch.no_grad():
        boundary_states = model(
            input_ids=ids, attention_mask=mask, output_hidden_states=True
        ).hidden_states[3]
    top_states(model, 3, boundary_states, mask)[-1][real].sum().backward()
    for name, grad in expected.items():
        torch.testing.assert_close(
            dict(model.named_parameters())[name].grad, grad, atol=1e-5, rtol=1e-4
        )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_only_the_top_layers_train_not_what_every_layer_shares(family):
    """What the bottom read must stay as it read it, or prediction's whole pass would give
    other states than the cache: MPNet's relative position bias and DeBERTa's relative
    embeddings, shared by every layer, stay frozen with the embeddings and the bottom."""
    model = small(family)
    backbone = SimpleNamespace(model=model)
    frozen_bottom(backbone, 3)
    trained = sorted(name for name, p in model.named_parameters() if p.requires_grad)
    assert trained and all(name.startswith("encoder.layer.3.") for name in trained), trained
    weights = dict(model.named_parameters())
    assert trained == sorted(name for name in top_layer_names(model, 3) if name in weights)


def test_a_family_the_table_does_not_call_is_refused_naming_those_it_does():
    import transformers

    from bistack.models.top_layers import layer_call

    model = transformers.DistilBertModel(
        transformers.DistilBertConfig(vocab_size=50, dim=16, n_layers=2, n_heads=2, hidden_dim=32)
    )
    with pytest.raises(ConfigError, match=r"a distilbert encoder's layers cannot be run.*mpnet"):
        layer_call(model)


def regressor(tmp_path, finetune, layers=3) -> dict:
    train = write_tsv(tmp_path / "train.tsv", [(t, float(y)) for t, y in sentiment_rows(24, 0)])
    dev = write_tsv(tmp_path / "dev.tsv", [(t, float(y)) for t, y in sentiment_rows(8, 1)])
    return {
        "kind": "layer_regressor",
        "data": {
            "train": str(train),
            "dev": str(dev),
            "text_column": "sentence",
            "label_columns": ["label"],
        },
        "backbone": {
            "path": str(tiny_transformer(tmp_path / "bb", layers)),
            "max_length": 16,
            "cache_dir": str(tmp_path / "cache"),
            "finetune": finetune,
            "lr": 1e-3,
        },
        "layer_pooling": {"type": "lstm", "lstm_hidden": 8, "vectors": "mean"},
        "optimizer": {"name": "adamw", "lr": 0.01},
        "train": {"batch_size": 8, "max_epochs": 2, "patience": 2, "seed": 3},
    }


@pytest.mark.parametrize("precision", ["32", "bf16-mixed"])
def test_a_top_k_run_trains_its_top_layers_alone_and_predicts_as_it_trained(tmp_path, precision):
    """The top layers alone train and are saved (the encoder's other weights are read from the
    original), and a fresh process, with no cache, runs the whole encoder (its bottom at the
    frozen pass's precision, its top in float32) and gives training's dev scores."""
    from safetensors.torch import load_file

    config = regressor(tmp_path, 1)
    config["backbone"]["precision"] = precision
    trained = train_config(tasks.config_from_dict(config), tmp_path / "run", RunOptions())
    log = (tmp_path / "run" / "train.log").read_text()
    assert "the frozen bottom (layers 1-2) of 24 texts computed and cached" in log
    assert "its top 1 layers fine-tuned" in log
    assert ("the frozen bottom's pass in bf16-mixed" in log) == (precision == "bf16-mixed")
    assert not (trained.model_dir / "backbone").exists()
    before = load_file(str(tmp_path / "bb" / "model.safetensors"))
    after = load_file(str(trained.model_dir / "top_layers.safetensors"))
    assert sorted(after) == sorted(name for name in before if ".layer.2." in name)
    assert all(not torch.equal(before[name], after[name]) for name in after)
    # In a fresh process, no cache: the whole encoder runs, and gives training's dev outputs.
    recorded = json.loads((trained.model_dir.parent / "dev_metrics.json").read_text())
    script = (
        "import json, sys; from bistack.predictor import open_model;"
        "from bistack.data.tables import read_table;"
        f"m = open_model({str(trained.model_dir)!r});"
        f"rows = read_table({str(tmp_path / 'dev.tsv')!r}, 'sentence', ['label']);"
        "print(json.dumps(m.evaluate(" + repr(str(tmp_path / "dev.tsv")) + ").to_json()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    scores = json.loads(done.stdout.strip().splitlines()[-1])
    assert scores["rmse"] == pytest.approx(recorded["rmse"], abs=1e-5), (scores, recorded)
    # A second run over the same texts reads the bottom from the cache.
    train_config(tasks.config_from_dict(config), tmp_path / "again", RunOptions())
    assert "of 24 texts read from the cache" in (tmp_path / "again" / "train.log").read_text()


def test_k_as_the_encoders_layers_is_full_fine_tuning_and_more_is_refused(tmp_path):
    from safetensors.torch import load_file

    whole = train_config(
        tasks.config_from_dict(regressor(tmp_path, True, 2)), tmp_path / "a", RunOptions()
    )
    top = train_config(
        tasks.config_from_dict(regressor(tmp_path, 2, 2)), tmp_path / "b", RunOptions()
    )
    for name in ("model.safetensors", "backbone/model.safetensors"):
        a, b = load_file(str(whole.model_dir / name)), load_file(str(top.model_dir / name))
        assert all(torch.equal(a[k], b[k]) for k in a), name
    with pytest.raises(ConfigError, match="the encoder has 2 layers; give at most 2"):
        train_config(
            tasks.config_from_dict(regressor(tmp_path, 3, 2)), tmp_path / "c", RunOptions()
        )
    with pytest.raises(ConfigError, match="is at least 1"):
        tasks.config_from_dict(regressor(tmp_path, 0, 2) | {})


def test_a_cross_validation_pays_for_the_bottom_pass_once(tmp_path):
    """Every fold reads one cache of the frozen bottom, keyed by text: the first fold computes
    what it reads (its training rows and its held-out fold: every row), the others read it."""
    import bistack

    config = regressor(tmp_path, 1)
    config["data"]["dev"] = None
    config["train"]["max_epochs"] = 1
    bistack.cross_validate(config, tmp_path / "cv", folds=3, say=lambda _: None)
    said = [
        line
        for fold in ("fold0", "fold1", "fold2")
        for line in (tmp_path / "cv" / "folds" / fold / "train.log").read_text().splitlines()
        if line.startswith("the frozen bottom")
    ]
    assert len(said) == 6  # each fold's training rows and its held-out rows
    assert all("computed" in line for line in said[:2]), said
    assert all(line.split(" texts ")[1].startswith("read from the cache") for line in said[2:])


def test_a_top_k_model_exports_its_whole_encoder_within_the_stated_tolerance(tmp_path):
    """The export holds the whole graph (the original bottom, the trained top, in float32):
    its values within the export's stated tolerance of the PyTorch model's, whose bottom ran
    in bfloat16."""
    pytest.importorskip("onnxruntime", reason="the export needs bistack[onnx]")
    from bistack.export.onnx_export import export_model
    from bistack.predictor import open_model

    config = regressor(tmp_path, 1)
    config["backbone"]["precision"] = "bf16-mixed"
    trained = train_config(tasks.config_from_dict(config), tmp_path / "run", RunOptions())
    exported = export_model(trained.model_dir, tmp_path / "onnx")
    texts = [text for text, _ in sentiment_rows(6, 2)]
    ours = [p.values for p in open_model(trained.model_dir).predict(texts)]
    theirs = [p.values for p in open_model(exported).predict(texts)]
    for mine, other in zip(ours, theirs, strict=True):
        for key, value in mine.items():
            assert other[key] == pytest.approx(value, abs=5e-3), (mine, other)
