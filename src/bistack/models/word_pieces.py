"""Pre-tokenised sentences through a transformer: each word's subwords located
(:class:`WordPieces`, from ``bistack.data.subwords.word_pieces``) and every word's state in
every layer (:func:`word_layer_states`), what the taggers over a transformer's layers read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from bistack.data.subwords import word_pieces
from bistack.data.word_rows import Context
from bistack.models.backbone import TransformerBackbone
from bistack.models.frozen_pass import FLOAT32, FrozenPass
from bistack.models.top_layers import top_states
from bistack.transfer import to_device

Alignment = Literal["first", "mean", "last"]  # which of a word's subwords stand for it


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class WordPieces:
    """Pre-tokenised sentences as subword rows, with each word's subwords located.

    input_ids, attention_mask: ``(rows, seq_len)``, one row per sentence, or per chunk of
    words when a sentence is longer than the model's limit (no word is ever cut or dropped).
    subword_word: ``(rows * seq_len,)`` the word (numbered over all sentences) each subword
    belongs to, -1 for special tokens and padding; first_subword, last_subword:
    ``(total_words,)`` the flat position of each word's first and last subword; lengths: words
    per sentence.
    """

    input_ids: Tensor
    attention_mask: Tensor
    subword_word: Tensor
    first_subword: Tensor
    last_subword: Tensor
    lengths: list[int]

    def to(self, device: torch.device | str) -> WordPieces:
        return WordPieces(
            to_device(self.input_ids, device),
            to_device(self.attention_mask, device),
            to_device(self.subword_word, device),
            to_device(self.first_subword, device),
            to_device(self.last_subword, device),
            self.lengths,
        )


def tokenize_words(
    backbone: TransformerBackbone,
    sentences: Sequence[Sequence[str]],
    max_length: int | None,
    contexts: Sequence[Context] | None = None,
    context: int = 0,
) -> WordPieces:
    """Subwords of pre-tokenised ``sentences`` (``bistack.data.subwords.word_pieces``), each
    row reading up to ``context`` subwords of the words around it (``contexts``) when given."""
    settings = backbone.subword_settings(max_length, context)
    arrays = word_pieces(backbone.subwords, sentences, settings, contexts if context else None)
    return WordPieces(
        torch.from_numpy(arrays.input_ids),
        torch.from_numpy(arrays.attention_mask),
        torch.from_numpy(arrays.subword_word),
        torch.from_numpy(arrays.first_subword),
        torch.from_numpy(arrays.last_subword),
        arrays.lengths,
    )


def word_layer_states(
    backbone: TransformerBackbone,
    pieces: WordPieces,
    alignment: Alignment,
    frozen: FrozenPass = FLOAT32,
    boundary: int | None = None,
) -> Tensor:
    """Every word's state in every layer ``(total_words, num_layers, hidden_size)``: its first
    subword's, the mean of its subwords', or its last subword's (the encoder run as the
    ``frozen`` pass says; a fine-tuned one trains in float32). With ``boundary`` (a top-K
    tagger's), the layers above it run in float32 from the states the pass gave there, as
    training ran them from its cache."""
    hidden = backbone.hidden_states(pieces.input_ids, pieces.attention_mask, frozen)
    if boundary is None:
        first, last = pieces.first_subword, pieces.last_subword
        return aligned_words(hidden[1:], pieces.subword_word, first, last, alignment)
    upper = top_states(backbone.model, boundary, hidden[boundary], pieces.attention_mask)
    layers = [*hidden[1 : boundary + 1], *upper]
    return aligned_words(
        layers, pieces.subword_word, pieces.first_subword, pieces.last_subword, alignment
    )


def aligned_words(
    layers: Sequence[Tensor],
    subword_word: Tensor,
    first_subword: Tensor,
    last_subword: Tensor,
    alignment: Alignment,
) -> Tensor:
    """Each word's state in each of ``layers`` (each ``(rows, seq, hidden)``) ``(total_words,
    len(layers), hidden)``, by ``alignment``; ``subword_word`` ``(rows * seq,)`` each
    subword's word (-1: none), ``first_subword``, ``last_subword`` ``(total_words,)`` where
    each word's subwords begin and end in the flat rows."""
    states = torch.stack(list(layers), dim=2)  # (rows, seq, layers, hidden)
    flat = states.flatten(0, 1)  # (rows * seq, layers, hidden)
    if alignment == "first":
        return flat[first_subword]
    if alignment == "last":
        return flat[last_subword]
    real = subword_word >= 0
    total = len(first_subword)
    sums = flat.new_zeros((total, *flat.shape[1:])).index_add_(0, subword_word[real], flat[real])
    counts = torch.zeros(total, dtype=flat.dtype, device=flat.device).index_add_(
        0, subword_word[real], torch.ones_like(subword_word[real], dtype=flat.dtype)
    )
    return sums / counts[:, None, None]
