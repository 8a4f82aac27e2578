"""How ``predict --format`` writes one prediction (JSON lines, CoNLL, CoNLL-U, doccano), and
the progress bar of batched prediction: shared by every kind and outlet, torch-free. A kind's
card says which formats it has; its predictions supply ``to_json`` (and ``to_conll``,
``to_conllu``, ``to_doccano`` for the formats it lists)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from bistack.errors import ConfigError, ModelFileError

T = TypeVar("T")


class Prediction(Protocol):
    """One input's prediction, as plain data (what ``predict --format jsonl`` prints)."""

    def to_json(self) -> dict[str, Any]: ...


def shown(batches: Iterable[T], show: bool) -> Iterable[T]:
    """``batches``, with a progress bar (batches per second) when ``show``. Without one, no
    tqdm at all: even a disabled bar makes tqdm's lock, a named semaphore that a server process
    ended by a signal leaves behind (and the resource tracker warns of at shutdown)."""
    if not show:
        return batches
    from tqdm import tqdm

    return tqdm(batches, desc="predicting", unit="batch", leave=False)


def json_line(record: dict[str, Any]) -> str:
    """One JSON object and a newline; a value that is not a number is an error, never NaN.
    Unicode line separators inside strings are written escaped, so that a reader splitting on
    any line break still sees one record a line."""
    try:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise ModelFileError(
            "the model predicted a value that is not a finite number; its weights or its "
            "calibration are broken: retrain it"
        ) from None
    for separator in LINE_SEPARATORS:
        line = line.replace(separator, f"\\u{ord(separator):04x}")
    return line + "\n"


LINE_SEPARATORS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"  # what str.splitlines also breaks at


def jsonl_line(prediction: Prediction, extra: dict[str, Any] | None = None) -> str:
    """The prediction's record as a JSON line, after ``extra`` (where the input was: its line
    or row, and the id field a user asked to keep)."""
    return json_line(joined(extra, prediction.to_json()))


def joined(extra: dict[str, Any] | None, record: dict[str, Any]) -> dict[str, Any]:
    """``extra``'s fields, then the record's; a field in both would lose one: an error."""
    both = sorted((extra or {}).keys() & record.keys())
    if both:
        raise ConfigError(
            f"--id-field {both[0]}: the prediction has a field of that name too; copy the id "
            "under another name"
        )
    return {**(extra or {}), **record}


def conll_block(prediction: Prediction, extra: dict[str, Any] | None = None) -> str:
    """``token<TAB>tag`` lines with a blank line after each sentence (taggers' predictions;
    CoNLL has no place for ``extra``)."""
    return prediction.to_conll()  # type: ignore[attr-defined]


def conllu_block(prediction: Prediction, extra: dict[str, Any] | None = None) -> str:
    """CoNLL-U sentences, each with its ``# text`` (taggers' predictions)."""
    return prediction.to_conllu()  # type: ignore[attr-defined]


def doccano_line(prediction: Prediction, extra: dict[str, Any] | None = None) -> str:
    """The text and its entities as a doccano JSON line, to load back into an annotation tool
    (which keeps ``extra``'s fields as the record's metadata)."""
    return json_line(joined(extra, prediction.to_doccano()))  # type: ignore[attr-defined]


# What each format writes, in a few words (``predict --format``'s help).
ABOUT = {
    "jsonl": "one JSON object a prediction",
    "conll": "token and tag columns, a blank line after each sentence",
    "conllu": "CoNLL-U sentences with their # text",
    "doccano": "span JSON lines an annotation tool loads back",
}

# How ``predict --format`` writes one prediction; the task table says which formats a kind has.
FORMATS: dict[str, Callable[..., str]] = {
    "jsonl": jsonl_line,
    "conll": conll_block,
    "conllu": conllu_block,
    "doccano": doccano_line,
}
