"""Length-bucketed batches and their tensors.

Sentences of similar length go together, so little compute is spent on padding; prediction
batches are sorted by length and the caller restores input order with the returned indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

import torch
from torch import Tensor

from bistack.data.features import (
    EncodedSentence,
    TokenRows,
    TokenVocabularies,
    encoded_rows,
    padded_rows,
    token_rows,
)
from bistack.transfer import to_device

PAD_TAG = -100  # ignored by cross-entropy; the CRF reads the mask instead


@dataclass
class TokenBatch:
    """Token features of ``batch_size`` texts padded to ``seq_len`` tokens.

    words, casing: ``(batch, seq_len)`` long, 0 at padding. chars: ``(unique_words,
    max_chars)`` char ids of each distinct token in the batch, char_lengths ``(unique_words,)``
    their lengths; char_index ``(batch, seq_len)`` maps each position to its row of ``chars``.
    mask: ``(batch, seq_len)`` bool; lengths: ``(batch,)`` each text's tokens. spellings: the
    token each row of ``chars`` spells (empty when unknown), which lets prediction reuse a
    word's character encoding (:class:`bistack.models.spelling_cache.SpellingCache`).

    The lengths (``HOST_FIELDS``) stay on the host when the batch moves to a device: packing
    orders a batch there, and a GPU's host would wait to read them back.
    """

    HOST_FIELDS: ClassVar[frozenset[str]] = frozenset({"char_lengths", "lengths"})

    words: Tensor
    casing: Tensor
    chars: Tensor
    char_lengths: Tensor
    char_index: Tensor
    mask: Tensor
    lengths: Tensor
    spellings: tuple[str, ...] = ()

    def to(self, device: torch.device | str) -> Self:
        moved: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor) and f.name not in self.HOST_FIELDS:
                value = to_device(value, device)
            moved[f.name] = value
        return type(self)(**moved)


@dataclass
class TaggingBatch(TokenBatch):
    """tags: ``(batch, seq_len)`` long with -100 at padding, or None when unlabelled."""

    tags: Tensor | None = None


@dataclass
class TextBatch(TokenBatch):
    """targets: ``(batch,)`` class ids, ``(batch, num_targets)`` floats, or None."""

    targets: Tensor | None = None


def padded(rows: Sequence[Sequence[int]], width: int, fill: int = 0) -> Tensor:
    """``(len(rows), width)`` long tensor of ``rows`` right-padded with ``fill``."""
    return torch.from_numpy(padded_rows(rows, width, fill))


def collate_tokens(
    sentences: Sequence[Sequence[str]], vocabularies: TokenVocabularies
) -> TokenBatch:
    """Pad texts (their tokens) into a :class:`TokenBatch`: what prediction feeds a network,
    with no per-sentence encoding first (:func:`token_rows` looks each distinct token up)."""
    return batch_of_rows(token_rows(sentences, vocabularies))


def collate_encoded(
    sentences: Sequence[EncodedSentence], vocabularies: TokenVocabularies
) -> TokenBatch:
    """Pad sentences encoded before (training's, once a run) into a :class:`TokenBatch`,
    their ids as they are."""
    return batch_of_rows(encoded_rows(sentences, vocabularies))


def batch_of_rows(rows: TokenRows) -> TokenBatch:
    """A :class:`TokenBatch` of :class:`TokenRows`.

    Each tensor wraps a numpy array filled in one assignment: building them row by row cost
    more than the BiLSTM step it feeds (``benchmarks/results/speed.md``), and ``torch.tensor``
    over nested lists was still the largest part of a batch's host work
    (``benchmarks/results/host-work.md``).
    """
    lengths = torch.from_numpy(rows.lengths)
    return TokenBatch(
        words=torch.from_numpy(rows.words),
        casing=torch.from_numpy(rows.casing),
        chars=torch.from_numpy(rows.chars),
        char_lengths=torch.from_numpy(rows.char_lengths),
        char_index=torch.from_numpy(rows.char_index),
        mask=torch.arange(rows.words.shape[1]) < lengths.unsqueeze(1),
        lengths=lengths,
        spellings=rows.spellings,
    )


def collate_tagging(
    sentences: Sequence[EncodedSentence], vocabularies: TokenVocabularies
) -> TaggingBatch:
    """Pad encoded sentences and their tags (if every one has tags) into a TaggingBatch."""
    tokens = collate_encoded(sentences, vocabularies)
    tags = None
    if all(s.tags for s in sentences):
        tags = padded([s.tags for s in sentences], tokens.words.size(1), fill=PAD_TAG)
    return TaggingBatch(**vars(tokens), tags=tags)


def collate_text(
    sentences: Sequence[EncodedSentence],
    vocabularies: TokenVocabularies,
    targets: Tensor | None = None,
) -> TextBatch:
    """Pad encoded texts, with their ``targets`` rows if given, into a TextBatch."""
    tokens = collate_encoded(sentences, vocabularies)
    return TextBatch(**vars(tokens), targets=targets)
