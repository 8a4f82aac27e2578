"""What a model kind predicts from: the kinds of input its card names, each a plain-data
description (no torch) of which values it accepts and which of the model's methods predicts a
list of them. The outlets (the command line, the server, corpus prediction, the Ray step) read a
value from wherever it comes (an argument, a line, a JSON field, a table cell), and the kind's
card says whether and how it is predicted.

A kind with another input (a text with a marked span, a pair of texts) defines its own
:class:`Input` beside its card; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


def described(inputs: Sequence[Input]) -> str:
    """``a text or a list of tokens``: what a kind takes, for messages."""
    return " or ".join(i.description for i in inputs)
