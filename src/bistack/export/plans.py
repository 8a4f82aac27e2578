"""What each model kind exports: its inference graph, example inputs to trace and check it with,
the runtime that reads it, and the settings and files that runtime needs. The task table names
one plan per kind that can be exported."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from bistack.data.tokenize import tokenize_text
from bistack.export.graphs import (
    DYNAMIC_AXES,
    INPUTS,
    LAYER_DYNAMIC_AXES,
    LAYER_INPUTS,
    WORD_DYNAMIC_AXES,
    WORD_INPUTS,
    LayerTaggerGraph,
    LayerTextGraph,
    TaggerGraph,
    TextGraph,
    example_sentences,
    example_subwords,
    example_texts,
    example_tokens,
    token_inputs,
    vocabulary_words,
    word_inputs,
)
from bistack.models.backbone import tokenize_words

# How an exported directory is run (``bistack.export.runtime.RUNTIMES``): "tagging" turns tag
# ids into entities; "text" turns probabilities or values into labelled records; "layer_text"
# and "layer_tagging" do the same for texts and words read by a transformer (its tokenizer
# ships with the export).
TAGGING, TEXT, LAYER_TEXT, LAYER_TAGGING = "tagging", "text", "layer_text", "layer_tagging"


@dataclass(frozen=True)
class ExportPlan:
    """graph: the module traced into ``model.onnx``, with ``input_names`` and
    ``output_names``; examples(variant): its inputs, variant 0 to trace, 1 (other sizes) to
    check the result against PyTorch within ``tolerance``; runtime: ``TAGGING``, ``TEXT`` or
    ``LAYER_TEXT``; settings: what that runtime needs beside the config; files: name -> how to
    write that file beside the graph; vocabularies: written as vocab.json (token models)."""

    graph: nn.Module
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: Mapping[str, Mapping[int, str]]
    examples: Callable[[int], tuple[Tensor, ...]]
    runtime: str
    settings: dict[str, Any] = field(default_factory=dict)
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)
    vocabularies: dict[str, Any] = field(default_factory=dict)
    tolerance: float = 1e-5

    def write_files(self, directory: Path) -> None:
        for name, write in self.files.items():
            write(directory / name)


def token_plan(model: Any, graph: nn.Module, runtime: str, settings: dict[str, Any]) -> ExportPlan:
    """A model over bistack's own token features (words, casing, characters)."""
    vocabularies = model.vocabularies

    def examples(variant: int) -> tuple[Tensor, ...]:
        return example_tokens(vocabularies, [[5, 3, 2], [1, 9, 4]][variant])

    outputs = graph.output_names
    return ExportPlan(
        graph,
        INPUTS,
        outputs,
        DYNAMIC_AXES | {name: {0: "batch"} for name in outputs},
        examples,
        runtime,
        settings,
        vocabularies=vocabularies.to_json(),
    )


def tagger_plan(tagger: Any) -> ExportPlan:
    """A recurrent tagger: the whole network and its CRF decode; tags come out."""
    graph = TaggerGraph(tagger.model)
    return token_plan(tagger, graph, TAGGING, {"output_scheme": tagger.output_scheme})


def classifier_plan(classifier: Any) -> ExportPlan:
    """A recurrent classifier: probabilities come out, temperature-scaled as in PyTorch."""
    graph = TextGraph(
        classifier.model, attends=classifier.attends, temperature=classifier.outputs.temperature
    )
    return token_plan(classifier, graph, TEXT, {"outputs": classifier.outputs.info})


def regressor_plan(regressor: Any) -> ExportPlan:
    """A recurrent regressor: values in original units come out, calibrated as in PyTorch."""
    graph = TextGraph(regressor.model, attends=regressor.attends, affine=affine_of(regressor))
    return token_plan(regressor, graph, TEXT, {"outputs": regressor.outputs.info})


def affine_of(regressor: Any) -> tuple[list[float], list[float], list[float], list[float]]:
    """``(mean, std, scale, offset)`` per target: standardised outputs back to original units,
    then the dev calibration (scale 1, offset 0 without one)."""
    info = regressor.outputs.info
    count = len(info["targets"])
    scale, offset = [1.0] * count, [0.0] * count
    if info.get("calibration") is not None:
        scale = [float(pair[0]) for pair in info["calibration"]]
        offset = [float(pair[1]) for pair in info["calibration"]]
    return (list(info["mean"]), list(info["std"]), scale, offset)


# The transformer's float32 states differ between the two runtimes by a few 1e-6 (fused
# attention kernels), so outputs over a backbone are checked to this.
BACKBONE_TOLERANCE = 1e-4


def save_tokenizer(backbone: Any) -> Callable[[Path], None]:
    """Writes the backbone's fast tokenizer's own definition (also for a folder that has only
    a vocab.txt) to a path."""
    return lambda path: backbone.tokenizer.backend_tokenizer.save(str(path))


def layer_tagger_plan(tagger: Any) -> ExportPlan:
    """A tagger over a transformer's word states (stacked with the words' own features or
    not): the backbone, the layer mix, the tagger and its CRF decode in one graph; tags come
    out. The backbone's tokenizer ships beside it."""
    backbone, options = tagger.backbone, tagger.config.backbone
    vocabularies = tagger.vocabularies
    graph = LayerTaggerGraph(backbone.model, tagger.model)
    tokenizer = backbone.tokenizer
    settings = {
        "output_scheme": tagger.output_scheme,
        "labels": tagger.labels,
        "tokenizer": {
            "max_length": backbone.limit(options.max_length),
            "special_tokens": tokenizer.num_special_tokens_to_add(),
            "unk_token": tokenizer.unk_token or "[UNK]",
            "pad_id": tokenizer.pad_token_id,
            "batch_size": options.batch_size,
        },
    }
    words = vocabulary_words(vocabularies) if vocabularies is not None else ["word", "Paris", "."]
    stacked = vocabularies is not None
    names = WORD_INPUTS + (INPUTS if stacked else ("lengths",))

    def examples(variant: int) -> tuple[Tensor, ...]:
        # Variant 1 has a sentence longer than the model's limit: several subword rows.
        lengths = [[5, 3, 2], [1, 9, 40 + backbone.max_length]][variant]
        sentences = example_sentences(words, lengths)
        pieces = tokenize_words(backbone, sentences, options.max_length)
        tokens = token_inputs(vocabularies, sentences) if stacked else (torch.tensor(lengths),)
        return (*word_inputs(pieces), *tokens)

    return ExportPlan(
        graph,
        names,
        graph.output_names,
        WORD_DYNAMIC_AXES | (DYNAMIC_AXES if stacked else {}) | {"tags": {0: "batch"}},
        examples,
        LAYER_TAGGING,
        settings,
        files={"tokenizer.json": save_tokenizer(backbone)},
        vocabularies=vocabularies.to_json() if stacked else {},
    )


def layer_text_plan(model: Any) -> ExportPlan:
    """A classifier or regressor over a transformer's layers: the backbone and the layer
    pooling head in one graph; the backbone's tokenizer ships beside it."""
    backbone, options = model.backbone, model.config.backbone
    vocabularies = model.vocabularies
    stacked = vocabularies is not None
    regresses = model.outputs.REGRESSES
    graph = LayerTextGraph(
        backbone.model,
        model.model,
        temperature=None if regresses else model.outputs.temperature,
        affine=affine_of(model) if regresses else None,
    )
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
        LAYER_DYNAMIC_AXES | (DYNAMIC_AXES if stacked else {}) | {"outputs": {0: "texts"}},
        examples,
        LAYER_TEXT,
        settings,
        files={"tokenizer.json": save_tokenizer(backbone)},
        vocabularies=vocabularies.to_json() if stacked else {},
        tolerance=BACKBONE_TOLERANCE,
    )
