"""What a classifier or regressor exports (``bistack export``): its graph
(``bistack.text_models.graphs``), example inputs to trace and check it with, and what its
runtime needs (the outputs' meaning: labels and temperature, or targets with their scale and
calibration, applied by ``bistack.text_models.outputs`` as in PyTorch)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bistack.data.tokenize import tokenize_text
from bistack.models.graphs import (
    BACKBONE_TOLERANCE,
    DYNAMIC_AXES,
    INPUTS,
    ExportPlan,
    save_tokenizer,
    token_inputs,
    token_plan,
)
from bistack.text_models.graphs import (
    LAYER_DYNAMIC_AXES,
    LAYER_INPUTS,
    LayerHeadGraph,
    LayerTextGraph,
    LayerVectorsGraph,
    TextGraph,
    example_subwords,
    example_texts,
)

# What an exported member over a shared backbone reads: each text's per-layer vectors.
HEAD_INPUT = "layers"
KINDS = ("cls", "mean")  # the kinds of per-layer vectors, in the shared graph's output order


def text_plan(model: Any) -> ExportPlan:
    """A recurrent classifier or regressor: its raw scores (and attention) come out."""
    graph = TextGraph(model.model, attends=model.attends)
    axes = {"scores": {0: "batch"}, "attention": {0: "batch", 1: "seq"}}
    outputs = {name: axes[name] for name in graph.output_names}
    return token_plan(model, graph, {"outputs": model.outputs.info}, outputs)


def layer_text_plan(model: Any) -> ExportPlan:
    """A classifier or regressor over a transformer's layers: the backbone and the layer
    pooling head in one graph (raw scores come out); the backbone's tokenizer ships beside it."""
    backbone, options = model.backbone, model.config.backbone
    vocabularies = model.vocabularies
    stacked = vocabularies is not None
    graph = LayerTextGraph(backbone.model, model.model)
    settings = {"outputs": model.outputs.info, "tokenizer": tokenizer_settings(model)}

    def examples(variant: int) -> tuple[Tensor, ...]:
        texts = example_texts(variant)
        subwords = example_subwords(backbone, options, texts)
        if not stacked:
            return subwords
        tokens = [
            [t.text for t in tokenize_text(text, model.config.data.tokenizer)] for text in texts
        ]
        return (*subwords, *token_inputs(vocabularies, tokens))

    return ExportPlan(
        graph,
        LAYER_INPUTS + (INPUTS if stacked else ()),
        graph.output_names,
        LAYER_DYNAMIC_AXES | (DYNAMIC_AXES if stacked else {}) | {"scores": {0: "texts"}},
        examples,
        settings,
        files={"tokenizer.json": save_tokenizer(backbone)},
        vocabularies=vocabularies.to_json() if stacked else {},
        tolerance=BACKBONE_TOLERANCE,
    )


def tokenizer_settings(model: Any) -> dict[str, Any]:
    """How the model's backbone cuts texts into subword windows, for the exported runtime."""
    backbone, options = model.backbone, model.config.backbone
    return {
        "max_length": backbone.limit(options.max_length),
        "long_texts": options.long_texts,
        "stride": options.stride,
        "pad_id": backbone.tokenizer.pad_token_id,
        "batch_size": options.batch_size,
    }


def shared_backbone_plans(models: list[Any]) -> tuple[ExportPlan, list[ExportPlan]]:
    """Ensemble members over one frozen backbone read alike (their shared stage equal): the
    backbone's plan, once (each text's per-layer vectors of every kind they read, run once a
    batch for all), and each member's plan of its head alone, reading them."""
    first = models[0]
    kinds = tuple(kind for kind in KINDS if any(m.model.features == kind for m in models))
    backbone = first.backbone

    def subwords(variant: int) -> tuple[Tensor, ...]:
        return example_subwords(backbone, first.config.backbone, example_texts(variant))

    stage = ExportPlan(
        LayerVectorsGraph(backbone.model, kinds),
        LAYER_INPUTS,
        kinds,
        LAYER_DYNAMIC_AXES | {kind: {0: "texts"} for kind in kinds},
        subwords,
        {
            "tokenizer": tokenizer_settings(first),
            "kinds": list(kinds),
            "shape": vector_shape(first),
        },
        files={"tokenizer.json": save_tokenizer(backbone)},
        tolerance=BACKBONE_TOLERANCE,
    )
    return stage, [layer_head_plan(model) for model in models]


def vector_shape(model: Any) -> list[int]:
    """The (layers, hidden) shape of a text's vectors from ``model``'s backbone."""
    config = model.backbone.model.config
    return [config.num_hidden_layers, config.hidden_size]


def layer_head_plan(model: Any) -> ExportPlan:
    """A member's head over the shared backbone's vectors (``layers`` ``(texts, layers,
    hidden)`` of the kind it reads, then a stacked model's tokens) -> raw scores."""
    shape = vector_shape(model)
    vocabularies = model.vocabularies
    stacked = vocabularies is not None

    def examples(variant: int) -> tuple[Tensor, ...]:
        texts = example_texts(variant)
        seeded = torch.Generator().manual_seed(variant)
        layers = torch.randn(len(texts), *shape, generator=seeded)
        if not stacked:
            return (layers,)
        tokens = [
            [t.text for t in tokenize_text(text, model.config.data.tokenizer)] for text in texts
        ]
        return (layers, *token_inputs(vocabularies, tokens))

    settings = {
        "outputs": model.outputs.info,
        "reads": model.model.features,
        "shape": list(shape),
        "batch_size": model.config.backbone.batch_size,
    }
    return ExportPlan(
        LayerHeadGraph(model.model),
        (HEAD_INPUT, *(INPUTS if stacked else ())),
        LayerHeadGraph.output_names,
        {HEAD_INPUT: {0: "texts"}, "scores": {0: "texts"}} | (DYNAMIC_AXES if stacked else {}),
        examples,
        settings,
        vocabularies=vocabularies.to_json() if stacked else {},
    )
