"""What every exported graph shares: the token inputs (as ``collate_tokens`` builds them, as
int64 arrays), example batches to trace and check a graph with, the token embedder in
inference, and the plan a kind's exporter hands ``bistack export`` (``ExportPlan``).

A kind's own graph is in its family (``bistack.taggers.exported.graphs``,
``bistack.text_models.graphs``).
Graphs reuse the trained modules and their weights; only what cannot be traced is done
differently, with the same result: the char BiLSTM runs over all of a batch's words at once
instead of in length groups (a group's width would be frozen into the graph as a constant). The
encoder needs no change: each direction is one fused LSTM/GRU call (an ONNX ``LSTM``/``GRU``
node), or for the minGRU/minLSTM cells a scripted loop over positions (``bistack.min_cells``),
and the backward direction reads each sequence reversed within its own length (a ``Gather``), so
padding is never read, whatever the batch's width.

A graph returns what the shared output math reads (a tagger's emissions, a text model's raw
scores), so that PyTorch and the exported runtime turn them into predictions by one code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from bistack.data.features import TokenVocabularies, token_rows
from bistack.files.onnx_session import TOKEN_INPUTS
from bistack.models.embeddings import CharLSTMEncoder, TokenEmbedder

# The graph's inputs, as collate_tokens builds them: words, casing, char_index ``(batch, seq)``,
# chars ``(unique_words, max_chars)``, char_lengths ``(unique_words,)``, lengths ``(batch,)``.
INPUTS = TOKEN_INPUTS


DYNAMIC_AXES = {
    "words": {0: "batch", 1: "seq"},
    "casing": {0: "batch", 1: "seq"},
    "chars": {0: "unique_words", 1: "max_chars"},
    "char_lengths": {0: "unique_words"},
    "char_index": {0: "batch", 1: "seq"},
    "lengths": {0: "batch"},
}


def example_tokens(vocabularies: TokenVocabularies, lengths: list[int]) -> tuple[Tensor, ...]:
    """A batch of sentences of ``lengths`` made of the vocabulary's own words, as the graph's
    ``INPUTS`` (see ``example_sentences``)."""
    return token_inputs(vocabularies, example_sentences(vocabulary_words(vocabularies), lengths))


def vocabulary_words(vocabularies: TokenVocabularies) -> list[str]:
    """The vocabulary's own words, or one word when it has none."""
    return [w for w in vocabularies.words.items[2:] if w] or ["word"]


def example_sentences(words: list[str], lengths: list[int]) -> list[list[str]]:
    """Sentences of ``lengths`` made of ``words``, each row starting elsewhere in the list; the
    last sentence's last word is spelled with a character no vocabulary has."""
    sentences = [
        [words[(row * 7 + i) % len(words)] for i in range(n)] for row, n in enumerate(lengths)
    ]
    sentences[-1][-1] += "\u2603"
    return sentences


def token_inputs(vocabularies: TokenVocabularies, sentences: list[list[str]]) -> tuple[Tensor, ...]:
    """Token lists as the graph's ``INPUTS``, as ``collate_tokens`` builds them."""
    rows = token_rows(sentences, vocabularies)
    arrays = (rows.words, rows.casing, rows.chars, rows.char_lengths, rows.char_index)
    return (*(torch.from_numpy(a) for a in arrays), torch.from_numpy(rows.lengths))


def token_vectors(embedder: TokenEmbedder, inputs: tuple[Tensor, ...]) -> Tensor:
    """``TokenEmbedder.forward`` in inference, char words in one group ->
    ``(batch, seq, embedder.output_size)``."""
    words, casing, chars, char_lengths, char_index, _ = inputs
    parts = [] if embedder.word_embedding is None else [embedder.word_embedding(words)]
    if embedder.casing_embedding is not None:
        parts.append(embedder.casing_embedding(casing))
    encoder = embedder.char_encoder
    if isinstance(encoder, CharLSTMEncoder):
        spelled = encoder.embedding(chars)
        parts.append(encoder.encoder(spelled, lengths=char_lengths).summary[char_index])
    elif encoder is not None:  # the char CNN has no data-dependent shapes
        parts.append(encoder(chars, char_lengths)[char_index])
    return torch.cat(parts, dim=-1)


@dataclass(frozen=True)
class ExportPlan:
    """graph: the module traced into ``model.onnx``, with ``input_names`` and
    ``output_names``; examples(variant): its inputs, variant 0 to trace, 1 (other sizes) to
    check the result against PyTorch within ``tolerance``; settings: what the kind's runtime
    needs beside the config (in export.json); files: name -> how to write that file beside the
    graph; vocabularies: written as vocab.json (token models)."""

    graph: nn.Module
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: Mapping[str, Mapping[int, str]]
    examples: Callable[[int], tuple[Tensor, ...]]
    settings: dict[str, Any] = field(default_factory=dict)
    files: dict[str, Callable[[Path], None]] = field(default_factory=dict)
    vocabularies: dict[str, Any] = field(default_factory=dict)
    tolerance: float = 1e-5

    def write_files(self, directory: Path) -> None:
        for name, write in self.files.items():
            write(directory / name)


def token_plan(
    model: Any,
    graph: Any,  # an nn.Module whose output_names names its outputs
    settings: dict[str, Any],
    output_axes: Mapping[str, Mapping[int, str]],
) -> ExportPlan:
    """A model over bistack's own token features (words, casing, characters);
    ``output_axes``: the dynamic axes of the graph's outputs."""
    vocabularies = model.vocabularies

    def examples(variant: int) -> tuple[Tensor, ...]:
        return example_tokens(vocabularies, [[5, 3, 2], [1, 9, 4]][variant])

    return ExportPlan(
        graph,
        INPUTS,
        graph.output_names,
        DYNAMIC_AXES | dict(output_axes),
        examples,
        settings,
        vocabularies=vocabularies.to_json(),
    )


# The transformer's float32 states differ between the two runtimes by a few 1e-6 (fused
# attention kernels), so outputs over a backbone are checked to this.
BACKBONE_TOLERANCE = 1e-4


def save_tokenizer(backbone: Any) -> Callable[[Path], None]:
    """Writes the backbone's fast tokenizer's own definition (also for a folder that has only
    a vocab.txt) to a path."""
    return lambda path: backbone.tokenizer.backend_tokenizer.save(str(path))
