"""What a model kind predicts from: the kinds of input its card names, each a plain-data
description (no torch) of which values it accepts and which of the model's methods predicts a
list of them. The outlets (the command line, the server, corpus prediction, the Ray step) read a
value from wherever it comes (an argument, a line, a JSON field, a table cell), and the kind's
card says whether and how it is predicted.

A kind with another input (a text with a marked span, a pair of texts) defines its own
:class:`Input` beside its card; nothing else changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Input:
    """name: a word for messages and ``/info``; description: what a value of it is ("a
    text"); accepts(value): whether a value read from an input is one; predict(model, values,
    **options): the model's predictions for a list of them, in order; example: a value to
    warm a served model up with; read(value): the value as the model takes it (ValueError
    with a reason when it is not)."""

    name: str
    description: str
    accepts: Callable[[Any], bool]
    predict: Callable[..., Sequence[Any]]
    example: Any
    read: Callable[[Any], Any] = lambda value: value


def is_text(value: Any) -> bool:
    return isinstance(value, str)


def is_tokens(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(token, str) for token in value)


TEXT = Input(
    "text",
    "a text",
    is_text,
    lambda model, values, **options: model.predict(list(values), **options),
    "Warm up .",
)
TOKENS = Input(
    "tokens",
    "a list of tokens",
    is_tokens,
    lambda model, values, **options: model.predict_tokens(list(values), **options),
    ["Warm", "up", "."],
)


def texts_of(texts: Any) -> list[str]:
    """What a model's ``predict`` was given, as a list of texts: a single string is one text,
    any iterable (a generator too) is read once; an item that is not a string is a TypeError
    naming its index and type."""
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, bytes) or not isinstance(texts, Iterable):
        raise TypeError(f"predict takes a text or a list of texts, not {type(texts).__name__}")
    chosen = list(texts)
    for index, text in enumerate(chosen):
        if not isinstance(text, str):
            raise TypeError(
                f"text {index} is {type(text).__name__} {text!r:.40}, not a string; decode "
                "bytes first, and give tokens to predict_tokens"
            )
    return chosen


def token_lists_of(sentences: Any) -> list[list[str]]:
    """What ``predict_tokens`` was given, as lists of tokens; a string where a list of tokens
    belongs (it would be tagged character by character) is a TypeError naming its index."""
    if isinstance(sentences, str | bytes) or not isinstance(sentences, Iterable):
        raise TypeError(
            "pre-tokenised input is a list of sentences, each a list of tokens "
            "([['John', 'left']]); for raw text use predict"
        )
    chosen = []
    for index, tokens in enumerate(sentences):
        if isinstance(tokens, str) or not isinstance(tokens, Iterable):
            raise TypeError(
                f"sentence {index} is {type(tokens).__name__} {tokens!r:.40}, not a list of "
                "tokens; for raw text use predict"
            )
        tokens = list(tokens)
        if not set(map(type, tokens)) <= {str}:  # one pass in C; the loop names the culprit
            for position, token in enumerate(tokens):
                if not isinstance(token, str):
                    raise TypeError(
                        f"sentence {index}, token {position} is {type(token).__name__}, not a "
                        "string"
                    )
        chosen.append(tokens)
    return chosen


# The most characters one input record may hold (a text, or a list of tokens with a space
# between each two): a line past it is refused, naming its file and line, rather than run out
# of memory (a 100 MB line is 17 M words of recurrent states) or take minutes for one record.
# Split such a text into several records (a paragraph a line).
MAX_TEXT_CHARS = 1_000_000


def length_problem(value: Any) -> str | None:
    """Why ``value`` (a text or a list of tokens) is too long to predict; None when it is not."""
    size = len(value) if isinstance(value, str) else sum(len(t) + 1 for t in value) - 1
    if size <= MAX_TEXT_CHARS:
        return None
    return (
        f"{size:,} characters, more than the {MAX_TEXT_CHARS:,} one record may hold; split it "
        "into several (a paragraph a line)"
    )


SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_problem(value: Any) -> str | None:
    """Why ``value`` (a string, or one inside a list or object) is not valid Unicode text: a
    lone surrogate (what a command line's undecodable bytes or a JSON ``"\\ud800"`` give) can
    never be written as UTF-8. None when it is fine."""
    if isinstance(value, str):
        found = None if value.isascii() else SURROGATE.search(value)  # no loop over characters
        if found is None:
            return None
        return (
            f"not valid Unicode: a lone surrogate U+{ord(found.group()):04X} at character "
            f"{found.start()}"
        )
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return next((p for p in map(unicode_problem, items) if p is not None), None)


def described(inputs: Sequence[Input]) -> str:
    """``a text or a list of tokens``: what a kind takes, for messages."""
    return " or ".join(i.description for i in inputs)


@dataclass(frozen=True)
class Record:
    """One input record: its ``value`` (a text, a list of tokens, or what a JSON field or
    table cell holds; None when it holds nothing), or the ``error`` that kept it from being
    read; ``what`` names where the value was read (``field 'text'``) for messages;
    ``line``/``row`` say where it is in its source."""

    value: Any = None
    error: str | None = None
    what: str = "the record"
    line: int | None = None
    row: int | None = None
    ids: dict[str, Any] = field(default_factory=dict)  # the --id-field, as the input has it

    @property
    def where(self) -> dict[str, int]:
        """Its place, as the skipped-records file and every output record write it (under the
        names ``PLACE_FIELDS``)."""
        place = {"line": self.line, "row": self.row}
        return {name: value for name, value in place.items() if value is not None}


PLACE_FIELDS = ("line", "row")  # the names a record's place is written under
