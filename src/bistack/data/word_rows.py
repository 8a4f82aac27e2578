"""How a batch of pre-tokenised sentences is laid out for a transformer, without torch (the
exported runtime uses it too): sentences cut between words into rows that fit the model's
limit, and each sentence's words located in the batch's flat word numbering."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def split_into_chunks(pieces: Sequence[int], budget: int) -> list[tuple[int, int]]:
    """``(start, end)`` word ranges whose subword counts each fit ``budget`` (a word longer than
    the budget alone is a chunk of its own and is cut by the tokenizer: reported, not hidden)."""
    chunks, start, used = [], 0, 0
    for index, count in enumerate(pieces):
        if used + count > budget and index > start:
            chunks.append((start, index))
            start, used = index, 0
        used += count
    chunks.append((start, len(pieces)))
    return chunks


def sentence_rows(
    sentences: Sequence[Sequence[str]], counts: Sequence[int], budget: int, unknown: str
) -> tuple[list[list[str]], list[int]]:
    """The rows of words a transformer reads, and the flat number of each row's first word.

    ``counts``: subwords per word (all sentences' words in order); a word without subwords is
    read as ``unknown`` and counts one; a sentence whose subwords exceed ``budget`` (the model's
    limit less its special tokens) is cut between words into rows that fit.
    """
    rows: list[list[str]] = []
    row_first_word: list[int] = []
    position = 0
    for sentence in sentences:
        pieces = counts[position : position + len(sentence)]
        fixed = [w if c else unknown for w, c in zip(sentence, pieces, strict=True)]
        for start, end in split_into_chunks([max(c, 1) for c in pieces], budget):
            rows.append(fixed[start:end])
            row_first_word.append(position + start)
        position += len(sentence)
    return rows, row_first_word


def locate_subwords(
    row_word_ids: Sequence[Sequence[int | None]],
    row_first_word: Sequence[int],
    width: int,
    total_words: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each word's subwords are, in the rows padded to ``width`` and flattened.

    ``row_word_ids``: per row, the word (numbered within the row) of each subword, None for
    special tokens. Returns subword_word ``(rows * width,)`` (the flat word number, -1 for
    special tokens and padding), first_subword and last_subword ``(total_words,)``.
    """
    subword_word = np.full(len(row_word_ids) * width, -1, dtype=np.int64)
    first = np.zeros(total_words, dtype=np.int64)
    last = np.zeros(total_words, dtype=np.int64)
    for row, (word_ids, first_word) in enumerate(zip(row_word_ids, row_first_word, strict=True)):
        seen = set()
        for offset, word in enumerate(word_ids):
            if word is None:
                continue
            flat = row * width + offset
            subword_word[flat] = first_word + word
            last[first_word + word] = flat
            if word not in seen:
                seen.add(word)
                first[first_word + word] = flat
    return subword_word, first, last


def flat_word_index(lengths: Sequence[int]) -> np.ndarray:
    """``(batch, max(lengths))``: each sentence's words numbered over the whole batch (the
    first sentence's words are 0.., the next one's follow), 0 at padding."""
    counts = np.asarray(lengths, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    positions = np.arange(int(counts.max()))
    return (starts[:, None] + positions[None, :]) * (positions[None, :] < counts[:, None])
