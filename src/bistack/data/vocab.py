"""Vocabularies: string <-> index maps saved as JSON (never pickled)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

PAD = "<pad>"
UNK = "<unk>"


class Vocabulary:
    """Index 0 is padding and index 1 the unknown token, when the vocabulary has them."""

    def __init__(self, items: Sequence[str], *, with_specials: bool = True) -> None:
        self.items = [PAD, UNK, *items] if with_specials else list(items)
        self.with_specials = with_specials
        self.index = {item: i for i, item in enumerate(self.items)}
        if len(self.index) != len(self.items):
            raise ValueError("vocabulary items must be unique")

    @classmethod
    def build(cls, tokens: Iterable[str], min_freq: int = 1) -> Vocabulary:
        """Keep tokens seen at least ``min_freq`` times, most frequent first (ties by text)."""
        counts = Counter(tokens)
        kept = sorted(
            (t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t)
        )
        return cls(kept)

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item: str) -> bool:
        return item in self.index

    def lookup(self, item: str) -> int:
        """Index of ``item``; unknown items map to ``<unk>`` (a KeyError if there is none)."""
        if self.with_specials:
            return self.index.get(item, 1)
        return self.index[item]

    def to_json(self) -> dict[str, object]:
        return {
            "items": self.items[2:] if self.with_specials else self.items,
            "with_specials": self.with_specials,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Vocabulary:
        return cls(list(data["items"]), with_specials=bool(data["with_specials"]))
