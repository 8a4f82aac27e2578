"""backbone.gradient_checkpointing: a fine-tuned backbone recomputes its activations in the
backward pass (the same gradients, less memory); for a frozen backbone it is refused."""

from __future__ import annotations

import pytest
import torch
import yaml

from bistack.cli import main
from bistack.config import BackboneConfig
from bistack.models.backbone import TransformerBackbone
from bistack.models.backbone_training import trained_backbone
from tests.fixtures.written_models.make_fixtures import configs, tiny_transformer, write_data

pytest.importorskip("transformers", reason="needs bistack[transformers]")


def test_the_gradients_are_the_same_with_and_without_it(tmp_path):
    folder = tiny_transformer(tmp_path / "tiny-bert")
    grads = []
    for checkpointing in (False, True):
        backbone = TransformerBackbone.load(str(folder))
        settings = BackboneConfig(finetune=True, gradient_checkpointing=checkpointing)
        assert trained_backbone(backbone, settings) is backbone
        model = backbone.model
        on = getattr(model, "is_activation_checkpointing", None)
        assert (model.is_gradient_checkpointing if on is None else on) is checkpointing
        backbone.train()
        batch = backbone.tokenize(["john visited paris", "mary left rome yesterday"], "truncate")
        torch.manual_seed(0)
        out = backbone.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
        out.last_hidden_state.sum().backward()
        grads.append([p.grad.clone() for p in backbone.model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for plain, recomputed in zip(*grads, strict=True):
        torch.testing.assert_close(plain, recomputed)


def test_a_fine_tuned_model_trains_with_it_and_a_frozen_one_is_refused(tmp_path, capsys):
    write_data(tmp_path / "out", tmp_path)
    config = configs(tmp_path)["tiny_layer_classifier"]
    config["train"] = {**config["train"], "max_epochs": 1}
    config["backbone"] = {**config["backbone"], "finetune": True, "gradient_checkpointing": True}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = ["train", str(path), "--no-progress", "--output"]
    assert main([*argv, str(tmp_path / "run")]) == 0
    frozen = [*argv, str(tmp_path / "frozen"), "--set", "backbone.finetune=false"]
    assert main(frozen) == 2
    assert "backbone.gradient_checkpointing saves a fine-tuned backbone's memory" in (
        capsys.readouterr().err
    )
