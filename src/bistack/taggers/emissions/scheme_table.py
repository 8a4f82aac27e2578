"""Decoded tag ids to entities and to tags in the output scheme, for a whole batch of paths in a
few array operations instead of reading entities and writing them back sentence by sentence.

Under conlleval's chunk rules (``bistack.schemes.spans_from_tags``) whether an entity starts at
a token depends only on that token's tag and the one before it, and whether it ends there only
on that tag and the one after it; each entity's type is its tags'. So two tables over pairs of
labels (``K`` labels and one ``O`` beyond either end of a sentence) find every entity at once,
and a token's tag in any output scheme, a function of three neighbouring tags, is one lookup in
a ``(K+1)^3`` table. Both give what ``spans_from_tags`` and ``convert_tags`` give, for any path,
one that no scheme allows included (tests/taggers/emissions/test_scheme_table.py checks every
path of up to four tags over two types).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import numpy as np

from bistack.schemes import PLAIN, chunk_ends, chunk_starts, normalise_scheme, split_tag
from bistack.taggers.emissions.confidence import Span

_PREFIX_CODES = "BIES"  # an output tag's index: 1 + 4 * type + this code; 0 is "O"


class Paths:
    """Paths of label ids laid end to end (``tags``), with each path's ``lengths`` and where it
    ``ends`` in ``tags``."""

    def __init__(self, paths: Sequence[Sequence[int]]) -> None:
        self.lengths = np.fromiter(map(len, paths), np.intp, len(paths))
        self.ends = np.cumsum(self.lengths)
        total = int(self.ends[-1:].sum())
        self.tags = np.fromiter(itertools.chain.from_iterable(paths), np.intp, total)

    def neighbours(self, edge: int) -> tuple[np.ndarray, np.ndarray]:
        """The tag before and after each tag; ``edge`` (an "O") beyond a path's ends."""
        before, after = np.empty_like(self.tags), np.empty_like(self.tags)
        before[1:], after[:-1] = self.tags[:-1], self.tags[1:]  # (np.roll: 20 µs a call)
        before[self.ends[:-1]] = after[self.ends - 1] = edge
        before[:1] = edge
        return before, after

    def of_tags(self, values: np.ndarray) -> list[list[float]]:
        """Each path's ``values`` ``(paths, seq_len, num_tags)`` of its own tags."""
        rows = np.repeat(np.arange(len(self.lengths)), self.lengths)
        positions = np.arange(len(self.tags)) - np.repeat(self.ends - self.lengths, self.lengths)
        return self.split(values[rows, positions, self.tags].tolist())

    def split(self, values: list) -> list[list]:
        """``values``, one a tag laid end to end, back into one list a path."""
        flat = iter(values)
        return [list(itertools.islice(flat, n)) for n in self.lengths.tolist()]


class Chunks:
    """Where entities start and end in paths of ids of entity ``labels`` (no "none" scheme)."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.edge = len(labels)
        split = [split_tag(tag) for tag in [*labels, "O"]]
        self.types = sorted({kind for _, kind in split if kind})
        self.kind = np.array([self.types.index(k) if k else -1 for _, k in split])
        pairs = list(itertools.product(split, repeat=2))
        size = len(split)
        starts = [chunk_starts(a[0], b[0], a[1], b[1]) for a, b in pairs]
        ends = [chunk_ends(a[0], b[0], a[1], b[1]) for a, b in pairs]
        self.starts = np.array(starts).reshape(size, size)  # [before, tag]: one starts at tag
        self.ends = np.array(ends).reshape(size, size)  # [tag, after]: one ends at tag

    def spans(self, paths: Sequence[Sequence[int]]) -> list[list[Span]]:
        """Each path's entities, in order."""
        laid = Paths(paths)
        before, after = laid.neighbours(self.edge)
        opens = np.flatnonzero(self.starts[before, laid.tags])
        closes = np.flatnonzero(self.ends[laid.tags, after]) + 1
        rows = np.searchsorted(laid.ends, opens, side="right")
        offsets = (laid.ends - laid.lengths)[rows]
        names = np.array(self.types, dtype=object)[self.kind[laid.tags[opens]]]
        starts, ends = (opens - offsets).tolist(), (closes - offsets).tolist()
        found: list[list[Span]] = [[] for _ in paths]
        for row, start, end, name in zip(rows.tolist(), starts, ends, names.tolist(), strict=True):
            found[row].append((start, end, name))
        return found


class SchemeTable:
    """Paths of label ids (the model's ``labels``) to tags in ``scheme`` (``"none"``: the
    labels as they are)."""

    def __init__(self, labels: Sequence[str], scheme: str) -> None:
        self.edge = len(labels)
        size = self.edge + 1
        if scheme == PLAIN:
            self.names = np.array([*labels, "O"], dtype=object)
            self.table = np.broadcast_to(np.arange(size)[None, :, None], (size,) * 3)
            return
        chunks = chunks_of(tuple(labels))
        self.names = np.array(
            ["O", *(f"{p}-{kind}" for kind in chunks.types for p in _PREFIX_CODES)], dtype=object
        )
        begins = chunks.starts[:, :, None]  # (before, tag, 1): an entity starts at the tag
        closes = chunks.ends[None, :, :]  # (1, tag, after): it ends at the tag
        kind = chunks.kind
        canonical = normalise_scheme(scheme)
        if canonical == "IOB1":  # B- only where an entity of the same type ends just before
            same = (kind[:, None] == kind[None, :]) & (kind[:, None] >= 0)
            code = np.where(begins & same[:, :, None], 0, 1)
        elif canonical == "BIO":
            code = np.where(begins, 0, 1)
        else:
            code = np.select([begins & closes, begins, closes], [3, 0, 2], default=1)
        of_kind = kind.reshape(1, size, 1)
        table = np.where(of_kind >= 0, 1 + 4 * of_kind + code, 0)
        self.table = np.broadcast_to(table, (size,) * 3)  # [before, tag, after]

    def tags(self, paths: Sequence[Sequence[int]]) -> list[list[str]]:
        """Each path's tags in the output scheme."""
        laid = Paths(paths)
        before, after = laid.neighbours(self.edge)
        return laid.split(self.names[self.table[before, laid.tags, after]].tolist())


@functools.lru_cache(maxsize=16)
def chunks_of(labels: tuple[str, ...]) -> Chunks:
    """The entity tables of a tagger's labels, built once."""
    return Chunks(labels)


@functools.lru_cache(maxsize=16)
def scheme_table(labels: tuple[str, ...], scheme: str) -> SchemeTable:
    """The table for a tagger's labels and output scheme, built once."""
    return SchemeTable(labels, scheme)
