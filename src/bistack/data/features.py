"""Token features for tagging: word ids, a casing class and character ids.

Words can be lowercased (the casing class keeps what lowercasing removes) and have digits
normalised to 0 (Lample et al. 2016), so "1796" and "1815" share an embedding.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from bistack.data.vocab import Vocabulary

CASINGS = ("numeric", "mainly_numeric", "lower", "upper", "title", "has_digit", "other")
_DIGIT = re.compile(r"\d")


@functools.lru_cache(maxsize=1 << 16)  # tokens repeat: encoding a corpus calls this per token
def casing_class(token: str) -> int:
    """Index into :data:`CASINGS` (Reimers & Gurevych 2017); 0 is left for padding, so +1."""
    digits = sum(c.isdigit() for c in token)
    if token.isdigit():
        kind = "numeric"
    elif digits / len(token) > 0.5:
        kind = "mainly_numeric"
    elif token.islower():
        kind = "lower"
    elif token.isupper():
        kind = "upper"
    elif token[0].isupper():
        kind = "title"
    elif digits:
        kind = "has_digit"
    else:
        kind = "other"
    return CASINGS.index(kind) + 1


@dataclass(frozen=True)
class EncodedSentence:
    """Ids of one sentence: ``words``, ``casing`` and ``tags`` (empty when unlabelled)."""

    tokens: tuple[str, ...]
    words: tuple[int, ...]
    casing: tuple[int, ...]
    tags: tuple[int, ...]


@dataclass
class TokenVocabularies:
    """The vocabularies a tagger needs, and how words are normalised before lookup."""

    words: Vocabulary
    chars: Vocabulary
    tags: Vocabulary
    lowercase: bool
    normalise_digits: bool
    # Each token's (word id, casing class) and character ids, as looked up before: tokens
    # repeat, and a lookup normalises the word first. Bounded (see ``remembered``).
    _ids: dict[str, tuple[int, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _spellings: dict[str, bytes] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @staticmethod
    @functools.lru_cache(maxsize=1 << 16)
    def word_key(token: str, lowercase: bool, normalise_digits: bool) -> str:
        key = token.lower() if lowercase else token
        return _DIGIT.sub("0", key) if normalise_digits else key

    @classmethod
    def build(
        cls,
        sentences: Iterable[tuple[Sequence[str], Sequence[str]]],
        *,
        min_freq: int,
        lowercase: bool,
        normalise_digits: bool,
    ) -> TokenVocabularies:
        """Build from (tokens, tags) pairs of the training data."""
        words: list[str] = []
        chars: list[str] = []
        tags: set[str] = set()
        for tokens, sentence_tags in sentences:
            words.extend(cls.word_key(t, lowercase, normalise_digits) for t in tokens)
            chars.extend(c for t in tokens for c in t)
            tags.update(sentence_tags)
        return cls(
            Vocabulary.build(words, min_freq),
            Vocabulary.build(chars),
            Vocabulary(tag_order(tags), with_specials=False),
            lowercase,
            normalise_digits,
        )

    def key(self, token: str) -> str:
        return self.word_key(token, self.lowercase, self.normalise_digits)

    def token_ids(self, token: str) -> tuple[int, int]:
        """``token``'s word id and casing class."""
        found = self._ids.get(token)
        if found is None:
            found = (self.words.lookup(self.key(token)), casing_class(token))
            remembered(self._ids, token, found)
        return found

    def spelling(self, token: str) -> bytes:
        """``token``'s character ids (1, ``<unk>``, for a character unseen in training) as
        int64 bytes: a batch's spellings are joined and read as one array."""
        found = self._spellings.get(token)
        if found is None:
            index = self.chars.index
            found = np.fromiter((index.get(c, 1) for c in token), np.int64, len(token)).tobytes()
            remembered(self._spellings, token, found)
        return found

    def ids_of(self, tokens: Sequence[str]) -> np.ndarray:
        """``(len(tokens), 2)`` int64: each token's word id and casing class."""
        known = list(map(self._ids.get, tokens))  # tokens met before: one lookup each
        found = cast(list[tuple[int, int]], known)
        if None in known:
            found = [ids or self.token_ids(t) for ids, t in zip(known, tokens, strict=True)]
        flat = itertools.chain.from_iterable(found)
        return np.fromiter(flat, np.int64, 2 * len(tokens)).reshape(-1, 2)

    def encode(self, tokens: Sequence[str], tags: Sequence[str] = ()) -> EncodedSentence:
        """Ids for one sentence; a tag unseen in training raises KeyError (callers report it)."""
        known = self._ids.get  # a token met before: one lookup
        ids = [known(t) or self.token_ids(t) for t in tokens]
        return EncodedSentence(
            tokens=tuple(tokens),
            words=tuple(word for word, _ in ids),
            casing=tuple(casing for _, casing in ids),
            tags=tuple(self.tags.lookup(t) for t in tags),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "words": self.words.to_json(),
            "chars": self.chars.to_json(),
            "tags": self.tags.to_json(),
            "lowercase": self.lowercase,
            "normalise_digits": self.normalise_digits,
        }

    @classmethod
    def from_json(cls, data: dict) -> TokenVocabularies:
        return cls(
            Vocabulary.from_json(data["words"]),
            Vocabulary.from_json(data["chars"]),
            Vocabulary.from_json(data["tags"]),
            bool(data["lowercase"]),
            bool(data["normalise_digits"]),
        )


REMEMBERED = 1 << 17  # tokens a vocabulary remembers the ids of, at most


def remembered(kept: dict[str, Any], token: str, value: Any) -> None:
    """``kept[token] = value``, forgetting every earlier token when ``kept`` is full (a server
    meets new words without end; a corpus's own vocabulary is far smaller)."""
    if len(kept) >= REMEMBERED:
        kept.clear()
    kept[token] = value


@dataclass(frozen=True)
class TokenRows:
    """A batch's token features as right-padded int64 arrays (what the tensors of a
    ``TokenBatch`` are made of, and the ONNX runtime's inputs): words, casing, char_index
    ``(batch, seq)`` (0 at padding), chars ``(unique_words, max_chars)`` with char_lengths,
    and lengths ``(batch,)``; spellings: the token each row of chars spells."""

    words: np.ndarray
    casing: np.ndarray
    chars: np.ndarray
    char_lengths: np.ndarray
    char_index: np.ndarray
    lengths: np.ndarray
    spellings: tuple[str, ...]


def padded_rows(rows: Sequence[Sequence[int]], width: int, fill: int = 0) -> np.ndarray:
    """``rows`` right-padded with ``fill`` to ``width`` ``(len(rows), width)`` int64, filled
    in one assignment from the rows laid end to end."""
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    flat = np.fromiter(itertools.chain.from_iterable(rows), np.int64, int(lengths.sum()))
    return laid_out(flat, lengths, width, fill)


def token_rows(sentences: Sequence[Sequence[str]], vocabularies: TokenVocabularies) -> TokenRows:
    """Pad texts (their tokens) into :class:`TokenRows`, each distinct token of the batch
    looked up once. The one check of a batch's lengths (``bistack.masking``): here, on the
    host."""
    batch = FlatBatch(sentences)
    words, casing = vocabularies.ids_of(list(batch.unique)).T
    return batch.rows(words[batch.positions], casing[batch.positions], vocabularies)


def encoded_rows(
    sentences: Sequence[EncodedSentence], vocabularies: TokenVocabularies
) -> TokenRows:
    """:func:`token_rows` of sentences encoded before (training's, once a run): their ids as
    they are."""
    batch = FlatBatch([s.tokens for s in sentences])
    size = len(batch.positions)
    words = np.fromiter(itertools.chain.from_iterable(s.words for s in sentences), np.int64, size)
    casing = np.fromiter(itertools.chain.from_iterable(s.casing for s in sentences), np.int64, size)
    return batch.rows(words, casing, vocabularies)


class FlatBatch:
    """A batch's tokens laid end to end: each text's length, its distinct tokens in the order
    they first appear (``unique``: token -> its row of characters), each token's row
    (``positions``)."""

    def __init__(self, sentences: Sequence[Sequence[str]]) -> None:
        self.lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))
        if len(sentences) and self.lengths.min() < 1:
            at = int(self.lengths.argmin())
            raise ValueError(f"every text in a batch needs a token; text {at} has none")
        flat = list(itertools.chain.from_iterable(sentences))
        self.unique = dict(zip(dict.fromkeys(flat), itertools.count()))
        self.positions = np.fromiter(map(self.unique.__getitem__, flat), np.int64, len(flat))

    def rows(
        self, words: np.ndarray, casing: np.ndarray, vocabularies: TokenVocabularies
    ) -> TokenRows:
        """The padded rows of the batch with each token's ``words`` and ``casing`` (flat), its
        distinct tokens spelled once."""
        spelled = np.frombuffer(b"".join(map(vocabularies.spelling, self.unique)), np.int64)
        char_lengths = np.fromiter(map(len, self.unique), np.int64, len(self.unique))
        return TokenRows(
            words=laid_out(words, self.lengths),
            casing=laid_out(casing, self.lengths),
            chars=laid_out(spelled, char_lengths),
            char_lengths=char_lengths,
            char_index=laid_out(self.positions, self.lengths),
            lengths=self.lengths,
            spellings=tuple(self.unique),
        )


def laid_out(
    values: np.ndarray, lengths: np.ndarray, width: int | None = None, fill: int = 0
) -> np.ndarray:
    """Rows of ``lengths`` values, laid end to end in ``values``, right-padded with ``fill``
    to ``width`` (the longest row's when None): ``(len(lengths), width)`` int64."""
    width = int(lengths.max(initial=0)) if width is None else width
    real = np.arange(width)[None, :] < lengths[:, None]
    out = np.full(real.shape, fill, dtype=np.int64)
    out[real] = values
    return out


def tag_order(tags: Iterable[str]) -> list[str]:
    """Distinct tags, "O" first, then grouped by type: the one tag order of every tagger."""
    return sorted(set(tags), key=lambda t: (t != "O", t.partition("-")[2], t))
