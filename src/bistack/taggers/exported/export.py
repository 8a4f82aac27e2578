"""What a tagger exports (``bistack export``): its graph (``bistack.taggers.exported.graphs``),
example
inputs to trace and check it with, and what its runtime needs (the output scheme and the
decoder: labels, scheme and the CRF's scores)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bistack.files.onnx_session import WORD_INPUTS
from bistack.models.backbone import tokenize_words
from bistack.models.graphs import (
    DYNAMIC_AXES,
    INPUTS,
    ExportPlan,
    example_sentences,
    save_tokenizer,
    token_inputs,
    token_plan,
    vocabulary_words,
)
from bistack.taggers.exported.graphs import (
    OUTPUT_AXES,
    WORD_DYNAMIC_AXES,
    LayerTaggerGraph,
    TaggerGraph,
    word_inputs,
)


def tagger_plan(tagger: Any) -> ExportPlan:
    """A recurrent tagger: the whole network, its CRF decode and its emissions."""
    settings = {"output_scheme": tagger.output_scheme, "decoder": tagger.decoder.to_json()}
    return token_plan(tagger, TaggerGraph(tagger.model), settings, OUTPUT_AXES)


def layer_tagger_plan(tagger: Any) -> ExportPlan:
    """A tagger over a transformer's word states (stacked with the words' own features or
    not): the backbone, the layer mix, the tagger, its CRF decode and its emissions in one
    graph. The backbone's tokenizer ships beside it."""
    backbone, options = tagger.backbone, tagger.config.backbone
    vocabularies = tagger.vocabularies
    graph = LayerTaggerGraph(backbone.model, tagger.model)
    tokenizer = backbone.tokenizer
    settings = {
        "output_scheme": tagger.output_scheme,
        "decoder": tagger.decoder.to_json(),
        "tokenizer": {
            "max_length": backbone.limit(options.max_length),
            "special_tokens": tokenizer.num_special_tokens_to_add(),
            "unk_token": tokenizer.unk_token or "[UNK]",
            "pad_id": tokenizer.pad_token_id,
            "batch_size": options.batch_size,
            "context": options.context,  # the document context each row reads
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
        WORD_DYNAMIC_AXES | (DYNAMIC_AXES if stacked else {}) | OUTPUT_AXES,
        examples,
        settings,
        files={"tokenizer.json": save_tokenizer(backbone)},
        vocabularies=vocabularies.to_json() if stacked else {},
    )
