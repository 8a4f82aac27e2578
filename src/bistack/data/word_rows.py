"""How a batch of pre-tokenised sentences is laid out for a transformer, without torch (the
exported runtime uses it too): sentences cut between words into rows that fit the model's
limit, and each sentence's words located in the batch's flat word numbering."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bistack.data.conll import Sentence


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


@dataclass(frozen=True)
class Context:
    """The words around a sentence in its document: ``before`` it (in order, so the nearest
    last) and ``after`` it (the nearest first)."""

    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


def document_contexts(
    sentences: Sequence[Sequence[str]], documents: Sequence[Any], words: int
) -> list[Context]:
    """Up to ``words`` words on each side of every sentence, from the sentences next to it in
    the same document: ``documents[i]`` names sentence i's, and a document's sentences come in
    order, one after the other; a neighbour of another document ends the context there."""
    contexts = []
    for index, document in enumerate(documents):
        before: list[str] = []
        other = index - 1
        while other >= 0 and documents[other] == document and len(before) < words:
            before[:0] = sentences[other]
            other -= 1
        after: list[str] = []
        other = index + 1
        while other < len(sentences) and documents[other] == document and len(after) < words:
            after.extend(sentences[other])
            other += 1
        contexts.append(
            Context(tuple(before[len(before) - min(words, len(before)) :]), tuple(after[:words]))
        )
    return contexts


@dataclass(frozen=True)
class Rows:
    """The rows of words a transformer reads: ``words[r]`` is row r's, of which ``sizes[r]``
    words from ``offsets[r]`` on are its sentence's own (flat word number ``first_word[r]``
    on); the others are context, read but not located."""

    words: list[list[str]]
    first_word: list[int]
    offsets: list[int]
    sizes: list[int]


def sentence_rows(
    sentences: Sequence[Sequence[str]],
    counts: Mapping[str, int],
    budget: int,
    unknown: str,
    contexts: Sequence[Context] | None = None,
    context: int = 0,
) -> Rows:
    """The rows of words a transformer reads.

    ``counts``: subwords per word; a word without subwords is read as ``unknown`` and counts
    one; a sentence whose subwords exceed ``budget`` (the model's limit less its special tokens)
    is cut between words into rows that fit. With ``contexts``, each row also reads up to
    ``context`` subwords on each side (never more than the row leaves free, shared evenly): the
    sentence's own words outside the row, then its context's, whole words only.
    """
    rows = Rows([], [], [], [])
    position = 0
    for number, sentence in enumerate(sentences):
        fixed = [w if counts[w] else unknown for w in sentence]
        sizes = [max(counts[w], 1) for w in sentence]
        around = contexts[number] if contexts is not None else Context()
        for start, end in split_into_chunks(sizes, budget):
            side = min(context, (budget - sum(sizes[start:end])) // 2) if contexts else 0
            before = _within([*around.before, *sentence[:start]][::-1], counts, side)[::-1]
            after = _within([*sentence[end:], *around.after], counts, side)
            rows.words.append(
                [
                    *(w if counts[w] else unknown for w in before),
                    *fixed[start:end],
                    *(w if counts[w] else unknown for w in after),
                ]
            )
            rows.first_word.append(position + start)
            rows.offsets.append(len(before))
            rows.sizes.append(end - start)
        position += len(sentence)
    return rows


def _within(words: Sequence[str], counts: Mapping[str, int], budget: int) -> list[str]:
    """The leading ``words`` whose subwords fit ``budget``."""
    taken, used = [], 0
    for word in words:
        used += max(counts[word], 1)
        if used > budget:
            break
        taken.append(word)
    return taken


def own_word_ids(word_ids: Sequence[int | None], offset: int, size: int) -> list[int | None]:
    """A row's subword-to-word map numbered within its sentence's own words, None for context
    and special tokens."""
    return [w - offset if w is not None and offset <= w < offset + size else None for w in word_ids]


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


WORD_SEPARATOR = "\x1f"  # joins a sentence's words into one cache-key text


def sentence_contexts(sentences: Sequence[Sentence], context: int) -> list[Context] | None:
    """The words around each sentence in its document, for a backbone that reads ``context``
    subwords a side (None when it reads none)."""
    if not context:
        return None
    return document_contexts(
        [s.tokens for s in sentences], [s.document for s in sentences], context
    )
