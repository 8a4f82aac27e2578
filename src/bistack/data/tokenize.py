"""Raw text to tokens with character offsets, so predicted spans map back onto the input.

NLTK's Punkt sentence splitter (with a list of common abbreviations, since no trained model may
be downloaded here) and its Treebank-style word tokenizer, which splits off punctuation and
clitics the way CoNLL-2003 and the Penn Treebank do.
"""

from __future__ import annotations

import importlib.util
import sys
import types
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
    parameters_class, sentence_class, word_class = _nltk_tokenizer_classes()
    parameters = parameters_class()
    parameters.abbrev_types = set(_ABBREVIATIONS.split())
    return sentence_class(parameters), word_class()


def _nltk_tokenizer_classes() -> tuple[type, type, type]:
    """NLTK's Punkt parameters and sentence splitter, and its word tokenizer, imported on first
    use. ``nltk/__init__`` imports the whole of NLTK (its classifiers pull in scikit-learn,
    pandas and SciPy: 2-5 s, more than torch, paid by every raw-text ``predict``), and these
    modules need none of it: unless NLTK is already imported, they load under a bare namespace
    for the package, and every ``nltk`` module is then dropped from ``sys.modules``, so that a
    later ``import nltk`` imports the whole package afresh, as if this had never happened."""
    if "nltk" not in sys.modules and (spec := importlib.util.find_spec("nltk")) is not None:
        namespace = types.ModuleType("nltk")
        namespace.__path__ = list(spec.submodule_search_locations or [])
        sys.modules["nltk"] = namespace
        try:
            from nltk.tokenize.destructive import NLTKWordTokenizer
            from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
        finally:
            for name in [m for m in sys.modules if m == "nltk" or m.startswith("nltk.")]:
                del sys.modules[name]
    else:
        from nltk.tokenize import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    return PunktParameters, PunktSentenceTokenizer, NLTKWordTokenizer


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
