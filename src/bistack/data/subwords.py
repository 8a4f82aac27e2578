"""How texts and pre-tokenised sentences become a transformer's subword rows, without torch, so
that a PyTorch backbone and an exported model's runtime cut them by one code: over a fast
tokenizer's own definition (the ``tokenizers`` library's ``Tokenizer``), as int64 arrays.

- Texts: each text one window, truncated to the limit, or cut into overlapping windows
  (``sliding``), each window knowing its text.
- Words: sentences cut between words into rows that fit the limit (``word_rows``), with each
  word's subwords located; a word without subwords is read as the unknown token. A row may
  also read the words around it in its document (``context``): read, never located.

Rows are right-padded to the longest with the pad id; the attention mask is 1 at real subwords.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bistack.data.word_rows import Context, locate_subwords, own_word_ids, sentence_rows


@dataclass(frozen=True)
class SubwordSettings:
    """What cutting needs of a tokenizer beside its definition: the window's length in
    subwords (special tokens included), the special tokens a row adds, the unknown token, the
    pad id, how much document context a row reads, and whether a batch's width is rounded up
    to a bucket (``bucketed``: for a compiled encoder, which compiles a graph for each new
    shape; the padding is masked, so the states are the same)."""

    limit: int
    special_tokens: int = 2
    unknown: str = "[UNK]"
    pad_id: int = 0
    context: int = 0  # subwords of the words around a sentence read on each side, at most
    bucketed: bool = False


SMALLEST_BUCKET = 16  # then 32, 64, ... up to the window's limit


def bucket(width: int, limit: int) -> int:
    """The smallest power of two from 16 that holds ``width`` subwords, at most ``limit``."""
    size = SMALLEST_BUCKET
    while size < width:
        size *= 2
    return max(width, min(size, limit))


def padded(
    rows: Sequence[Sequence[int]], settings: SubwordSettings
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, attention_mask)`` ``(rows, longest)`` int64, right-padded with the pad id (to the
    longest's bucket, where ``settings`` asks)."""
    pad_id = settings.pad_id
    width = max(len(row) for row in rows)
    if settings.bucketed:
        width = bucket(width, settings.limit)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = row
        mask[index, : len(row)] = 1
    return ids, mask


def text_windows(
    tokenizer: Any,
    texts: Sequence[str],
    settings: SubwordSettings,
    sliding: bool = False,
    stride: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask, window_text)``: one window per text, truncated to the
    limit, or with ``sliding`` every window of an overflowing text (consecutive windows share
    ``stride`` subwords, at most half a window); ``window_text`` ``(windows,)`` names each
    window's text."""
    return windows_batch(encode_windows(tokenizer, texts, settings, sliding, stride), settings)


def encode_windows(
    tokenizer: Any,
    texts: Sequence[str],
    settings: SubwordSettings,
    sliding: bool = False,
    stride: int = 0,
) -> list[list[list[int]]]:
    """Each text's windows as subword ids (see :func:`text_windows`), unpadded: what a run
    that reads the same texts every epoch tokenises once."""
    limit = settings.limit
    shared = min(stride, limit // 2) if sliding else 0
    tokenizer.no_padding()
    tokenizer.enable_truncation(limit, stride=shared, strategy="longest_first")
    return [
        [encoding.ids, *(part.ids for part in (encoding.overflowing if sliding else []))]
        for encoding in tokenizer.encode_batch(list(texts))
    ]


def windows_batch(
    windows: Sequence[Sequence[Sequence[int]]], settings: SubwordSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask, window_text)`` of texts' windows (:func:`encode_windows`),
    padded to the longest."""
    rows = [row for text in windows for row in text]
    owners = [index for index, text in enumerate(windows) for _ in text]
    ids, mask = padded(rows, settings)
    return ids, mask, np.asarray(owners, dtype=np.int64)


@dataclass(frozen=True)
class WordPieceArrays:
    """Pre-tokenised sentences as subword rows (see ``bistack.models.word_pieces.WordPieces``):
    input_ids, attention_mask ``(rows, seq_len)``; subword_word ``(rows * seq_len,)``;
    first_subword, last_subword ``(total_words,)``; lengths: words per sentence."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    subword_word: np.ndarray
    first_subword: np.ndarray
    last_subword: np.ndarray
    lengths: list[int]


def word_pieces(
    tokenizer: Any,
    sentences: Sequence[Sequence[str]],
    settings: SubwordSettings,
    contexts: Sequence[Context] | None = None,
) -> WordPieceArrays:
    """Subword rows of pre-tokenised ``sentences``: a sentence longer than the limit is cut
    between words into rows that each fit, so no word is ever cut or dropped. With
    ``contexts`` (one per sentence), each row also reads up to ``settings.context`` subwords of
    the words around it, whose states are not kept."""
    tokenizer.no_padding()
    tokenizer.no_truncation()
    words = [w for sentence in sentences for w in sentence]
    if contexts is not None:
        words += [w for c in contexts for w in (*c.before, *c.after)]
    unique = list(dict.fromkeys(words))
    encoded = tokenizer.encode_batch(unique, add_special_tokens=False)
    counts = {word: len(e.ids) for word, e in zip(unique, encoded, strict=True)}
    budget = settings.limit - settings.special_tokens
    context = settings.context if contexts is not None else 0
    rows = sentence_rows(sentences, counts, budget, settings.unknown, contexts, context)
    tokenizer.enable_truncation(settings.limit, strategy="longest_first")
    encodings = tokenizer.encode_batch(rows.words, is_pretokenized=True)
    ids, mask = padded([e.ids for e in encodings], settings)
    word_ids = [
        own_word_ids(e.word_ids, offset, size)
        for e, offset, size in zip(encodings, rows.offsets, rows.sizes, strict=True)
    ]
    total = sum(len(s) for s in sentences)
    located = locate_subwords(word_ids, rows.first_word, ids.shape[1], total)
    return WordPieceArrays(ids, mask, *located, [len(s) for s in sentences])
