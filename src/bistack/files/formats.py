"""What every kind's output shares: one prediction as a JSON line (``predict --format jsonl``,
which every kind that predicts writes), the fields an --input record's prediction carries, and
the progress bar of batched prediction; torch-free. A kind's card declares its formats
(``bistack.cards.OutputFormat``), a family's own formats live in its folder
(``bistack.taggers.models.formats``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

from bistack.errors import ConfigError, ModelFileError

T = TypeVar("T")


class Prediction(Protocol):
    """One input's prediction, as plain data (what ``predict --format jsonl`` prints)."""

    def to_json(self) -> dict[str, Any]: ...


# What makes a cell need quotes: the delimiter (added per table), a quote, or any line break a
# reader splits rows on (Python's csv module and pandas split on a lone \r as on \n).
_SPECIAL = ('"', "\r", "\n")


def table_line(cells: Iterable[Any], delimiter: str = ",") -> str:
    """One row of a CSV (or TSV) table bistack writes, ended by ``\n``: a cell holding the
    delimiter, a quote or a line break (a lone ``\r`` included, which ``csv.writer`` leaves
    bare when its rows end in ``\n``) is quoted, its quotes doubled; any other cell is written
    as it is, as ``csv.writer`` writes it. A row of one empty cell is ``""``, so that it is a
    row. Every table round-trips through pandas and Python's ``csv`` whatever its ids hold."""
    texts = ["" if cell is None else str(cell) for cell in cells]
    quoted = [
        f'"{text.replace(chr(34), chr(34) * 2)}"'
        if delimiter in text or any(mark in text for mark in _SPECIAL)
        else text
        for text in texts
    ]
    if quoted == [""]:
        quoted = ['""']
    return delimiter.join(quoted) + "\n"


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
