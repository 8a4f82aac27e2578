"""What a classifier or regressor exports (``bistack export``): its graph
(``bistack.text_models.graphs``), example inputs to trace and check it with, and what its
runtime needs (the outputs' meaning: labels and temperature, or targets with their scale and
calibration, applied by ``bistack.text_models.outputs`` as in PyTorch)."""

from __future__ import annotations

from typing import Any

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
    LayerTextGraph,
    TextGraph,
    example_subwords,
    example_texts,
)


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
    settings = {
        "outputs": model.outputs.info,
        "tokenizer": {
            "max_length": backbone.limit(options.max_length),
            "long_texts": options.long_texts,
            "stride": options.stride,
            "pad_id": backbone.tokenizer.pad_token_id,
            "batch_size": options.batch_size,
        },
    }

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
