"""Raw text to tokens with character offsets, so predicted spans map back onto the input.

NLTK's Punkt sentence splitter (with a list of common abbreviations, since no trained model may
be downloaded here) and its Treebank-style word tokenizer, which splits off punctuation and
clitics the way CoNLL-2003 and the Penn Treebank do.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

_ABBREVIATIONS = (
    "mr mrs ms dr prof st jr sr inc ltd co corp bros vs etc u.s u.k u.n e.g i.e a.m p.m "
    "jan feb mar apr jun jul aug sep sept oct nov dec gen col lt sgt capt rep sen gov pres no"
)


@dataclass(frozen=True)
class Token:
    """A token and its ``[start, end)`` character offsets in the original text."""

    text: str
    start: int
    end: int


@cache
def _tokenizers() -> tuple[PunktSentenceTokenizer, NLTKWordTokenizer]:
    # Imported on first use: NLTK takes most of a second to import, which every command
    # (even one that never tokenises raw text) would otherwise pay at start-up.
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    parameters = PunktParameters()
    parameters.abbrev_types = set(_ABBREVIATIONS.split())
    return PunktSentenceTokenizer(parameters), NLTKWordTokenizer()


def tokenize(text: str) -> list[list[Token]]:
    """Split ``text`` into sentences of tokens with offsets into ``text``."""
    sentence_splitter, word_tokenizer = _tokenizers()
    sentences = []
    for start, end in sentence_splitter.span_tokenize(text):
        tokens = [
            Token(text[start + a : start + b], start + a, start + b)
            for a, b in word_tokenizer.span_tokenize(text[start:end])
        ]
        if tokens:
            sentences.append(tokens)
    return sentences


def whitespace_tokenize(text: str) -> list[Token]:
    """Tokens separated by whitespace, for pre-tokenised text such as SST-2."""
    tokens, position = [], 0
    for piece in text.split():
        start = text.index(piece, position)
        position = start + len(piece)
        tokens.append(Token(piece, start, position))
    return tokens


def tokenize_text(text: str, tokenizer: str) -> list[Token]:
    """All tokens of ``text`` with ``tokenizer`` ("whitespace" or "text"), sentences joined."""
    if tokenizer == "whitespace":
        return whitespace_tokenize(text)
    return [token for sentence in tokenize(text) for token in sentence]
