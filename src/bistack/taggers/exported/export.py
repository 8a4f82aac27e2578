"""What a tagger exports (``bistack export``): its graph (``bistack.taggers.exported.graphs``),
example
inputs to trace and check it with, and what its runtime needs (the output scheme and the
decoder: labels, scheme and the CRF's scores)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bistack.data.word_rows import flat_word_index
from bistack.files.onnx_session import WORD_INPUTS
from bistack.models.graphs import (
    BACKBONE_TOLERANCE,
    DYNAMIC_AXES,
    INPUTS,
    ExportPlan,
    example_sentences,
    save_tokenizer,
    token_inputs,
    token_plan,
    vocabulary_words,
)
from bistack.models.word_pieces import tokenize_words
from bistack.taggers.exported.graphs import (
    OUTPUT_AXES,
    WORD_DYNAMIC_AXES,
    LayerTaggerGraph,
    LayerTaggerHeadGraph,
    TaggerGraph,
    WordStatesGraph,
    word_inputs,
)

# What an exported member over a shared backbone reads: the batch's flat word states.
HEAD_INPUT = "word_states"


def tagger_plan(tagger: Any) -> ExportPlan:
    """A recurrent tagger: the whole network, its CRF decode and its emissions."""
    settings = {"output_scheme": tagger.output_scheme, "decoder": tagger.decoder.to_json()}
    return token_plan(tagger, TaggerGraph(tagger.model), settings, OUTPUT_AXES)


def layer_tagger_plan(tagger: Any) -> ExportPlan:
    """A tagger over a transformer's word states (stacked with the words' own features or
    not): the backbone, the layer mix, the tagger, its CRF decode and its emissions in one
    graph. The backbone's tokenizer ships beside it."""
    backbone = tagger.backbone
    vocabularies = tagger.vocabularies
    graph = LayerTaggerGraph(backbone.model, tagger.model)
    settings = {
        "output_scheme": tagger.output_scheme,
        "decoder": tagger.decoder.to_json(),
        "tokenizer": tokenizer_settings(tagger),
    }
    stacked = vocabularies is not None
    names = WORD_INPUTS + (INPUTS if stacked else ("lengths",))

    def examples(variant: int) -> tuple[Tensor, ...]:
        sentences, lengths = example_batch(tagger, variant)
        pieces = tokenize_words(backbone, sentences, tagger.config.backbone.max_length)
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


def tokenizer_settings(tagger: Any) -> dict[str, Any]:
    """How the tagger's backbone cuts sentences into subword rows, for the exported runtime."""
    backbone, options = tagger.backbone, tagger.config.backbone
    tokenizer = backbone.tokenizer
    return {
        "max_length": backbone.limit(options.max_length),
        "special_tokens": tokenizer.num_special_tokens_to_add(),
        "unk_token": tokenizer.unk_token or "[UNK]",
        "pad_id": tokenizer.pad_token_id,
        "batch_size": options.batch_size,
        "context": options.context,  # the document context each row reads
    }


def example_batch(tagger: Any, variant: int) -> tuple[list[list[str]], list[int]]:
    """Sentences to trace (variant 0) and check (1) with, and their lengths; variant 1 has a
    sentence longer than the model's limit (several subword rows)."""
    vocabularies = tagger.vocabularies
    words = vocabulary_words(vocabularies) if vocabularies is not None else ["word", "Paris", "."]
    lengths = [[5, 3, 2], [1, 9, 40 + tagger.backbone.max_length]][variant]
    return example_sentences(words, lengths), lengths


def shared_backbone_plans(taggers: list[Any]) -> tuple[ExportPlan, list[ExportPlan]]:
    """Ensemble members over one frozen backbone read alike (their shared stage equal, their
    subword alignment included): the backbone's plan, once (each word's state in every layer,
    run once a batch for all), and each member's plan of its tagger alone, reading them."""
    first = taggers[0]
    backbone, options = first.backbone, first.config.backbone

    def pieces(variant: int) -> tuple[Tensor, ...]:
        sentences, _ = example_batch(first, variant)
        return word_inputs(tokenize_words(backbone, sentences, options.max_length))[:5]

    stage = ExportPlan(
        WordStatesGraph(backbone.model, first.model.alignment),
        WORD_INPUTS[:5],
        WordStatesGraph.output_names,
        {k: v for k, v in WORD_DYNAMIC_AXES.items() if k in WORD_INPUTS[:5]}
        | {"word_states": {0: "words"}},
        pieces,
        {"tokenizer": tokenizer_settings(first), "shape": word_state_shape(first)},
        files={"tokenizer.json": save_tokenizer(backbone)},
        tolerance=BACKBONE_TOLERANCE,
    )
    return stage, [layer_tagger_head_plan(tagger) for tagger in taggers]


def word_state_shape(tagger: Any) -> list[int]:
    """The (layers, hidden) shape of a word's states from ``tagger``'s backbone."""
    config = tagger.backbone.model.config
    return [config.num_hidden_layers, config.hidden_size]


def layer_tagger_head_plan(tagger: Any) -> ExportPlan:
    """A member's tagger over the shared backbone's word states (``word_states`` ``(words,
    layers, hidden)``, ``word_index``, then the words' own features or their lengths) -> its
    tags and emissions."""
    shape = word_state_shape(tagger)
    vocabularies = tagger.vocabularies
    stacked = vocabularies is not None

    def examples(variant: int) -> tuple[Tensor, ...]:
        sentences, lengths = example_batch(tagger, variant)
        seeded = torch.Generator().manual_seed(variant)
        words = torch.randn(sum(lengths), *shape, generator=seeded)
        index = torch.from_numpy(flat_word_index(lengths))
        tokens = token_inputs(vocabularies, sentences) if stacked else (torch.tensor(lengths),)
        return (words, index, *tokens)

    settings = {
        "output_scheme": tagger.output_scheme,
        "decoder": tagger.decoder.to_json(),
        "shape": list(shape),
        "batch_size": tagger.config.backbone.batch_size,
    }
    head_axes = {"word_states": {0: "words"}, "word_index": WORD_DYNAMIC_AXES["word_index"]}
    return ExportPlan(
        LayerTaggerHeadGraph(tagger.model),
        (HEAD_INPUT, "word_index", *(INPUTS if stacked else ("lengths",))),
        LayerTaggerHeadGraph.output_names,
        head_axes | (DYNAMIC_AXES if stacked else {"lengths": {0: "batch"}}) | OUTPUT_AXES,
        examples,
        settings,
        vocabularies=vocabularies.to_json() if stacked else {},
    )
