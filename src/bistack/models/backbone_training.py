"""A backbone as a network trains it: its optimizer groups (layer-wise learning rates), the
recomputation of its activations (gradient checkpointing) and compiling it (``train.compile``),
kept apart from :mod:`bistack.models.backbone`, which reads texts and words with it."""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import nn

from bistack.config import BackboneConfig
from bistack.data.subwords import SMALLEST_BUCKET
from bistack.models.backbone import TransformerBackbone

LAYER_NUMBER = re.compile(r"\.(?:layer|layers|h|block|blocks)\.(\d+)\.")  # encoder.layer.3.


def backbone_parameter_groups(
    backbone: TransformerBackbone, lr: float, layer_lr_decay: float = 1.0
) -> list[dict[str, Any]]:
    """Optimizer groups of a fine-tuned backbone with layer-wise learning-rate decay (as in
    ELECTRA and BEiT fine-tuning): the top layer (and what sits above it) at ``lr``, each layer
    below at the rate above it times ``layer_lr_decay``, the embeddings lowest. A decay of 1 is
    one group at ``lr``."""
    parameters = [(n, p) for n, p in backbone.named_parameters() if p.requires_grad]
    if layer_lr_decay == 1.0:
        return [{"params": [p for _, p in parameters], "lr": lr}]
    top = backbone.num_layers  # embeddings 0, layer i at depth i + 1, the rest above the last
    by_depth: dict[int, list[nn.Parameter]] = {}
    for name, parameter in parameters:
        found = LAYER_NUMBER.search(name)
        depth = int(found.group(1)) + 1 if found else (0 if "embed" in name else top)
        by_depth.setdefault(min(depth, top), []).append(parameter)
    return [
        {"params": params, "lr": lr * layer_lr_decay ** (top - depth)}
        for depth, params in sorted(by_depth.items())
    ]


def compile_backbones(model: nn.Module) -> int:
    """Compile the encoder of every backbone ``model`` trains (``train.compile``): in place
    (``nn.Module.compile``), so its weights keep their names in the saved files; its batches
    from now on padded to a few widths (``SubwordSettings.bucketed``), their rows dynamic, so
    real data's lengths compile a handful of graphs, not one a batch shape. Returns the graphs
    that may take: two a width (training, and scoring without gradients) and two more."""
    widths = 0
    for module in model.modules():
        if isinstance(module, TransformerBackbone):
            module.compiled = True
            module.model.compile()
            widths = max(widths, len(bucket_widths(module.limit(None))))
    return 2 * widths + 2


def bucket_widths(limit: int) -> list[int]:
    """The widths a compiled backbone's batches are padded to, up to ``limit`` subwords."""
    found = [SMALLEST_BUCKET]
    while found[-1] < limit:
        found.append(min(found[-1] * 2, limit))
    return found


def compiled_graphs() -> int:
    """The graphs PyTorch has compiled in this process so far (dynamo's count)."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def eager_fallbacks() -> int:
    """The calls that ran uncompiled in this process so far because a compiled function met
    more shapes than dynamo's recompile limit allows (8 by default): it warns once, then runs
    them eagerly."""
    found = torch._dynamo.utils.counters["unimplemented"]
    return sum(n for key, n in found.items() if key.startswith("Dynamo recompile limit"))


def trained_backbone(
    backbone: TransformerBackbone | None, config: BackboneConfig
) -> TransformerBackbone | None:
    """The backbone a network trains, as ``config`` says: None when it is frozen (the network
    reads cached vectors), else ``backbone``, recomputing its activations in the backward pass
    when ``gradient_checkpointing`` is on."""
    if not config.finetune or backbone is None:
        return None
    if config.gradient_checkpointing:
        model = backbone.model
        if hasattr(model, "activation_checkpointing_enable"):  # its name from transformers 5.2x
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable({"use_reentrant": False})
    return backbone
