"""A time split's order column read as times: one rule for the whole column, never text.

Sorted as text, ``10`` comes before ``9``, ``05/01/2021`` before ``31/12/2020`` and
``2020-1-5`` after ``2020-12-1``: a time split would then train folds on rows dated after the
ones they hold out, and its score would see the future. So the column is read as numbers (every
value a finite number), as ISO 8601 dates (``YYYY-MM-DD``, unpadded months and days too, with
a time after them or not), or in the ``strftime`` format the config gives
(``data.order_format``: ``%d/%m/%Y``, say). Anything else is refused, naming the first value
that fits none and its row: a missing value (a row without a time cannot be placed), ``NaN``,
``inf``, a mix of formats, or dates such as ``05/01/2021`` whose day and month could be either
way round (refused unless the config says which).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from bistack.errors import ConfigError

_ISO_DAY = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})")
_SLASHED = re.compile(r"\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}")
_MISSING = {"", "nan", "na", "n/a", "none", "null", "nat", "-", "?"}


def order_keys(
    values: Sequence[str], ordered_by: str, date_format: str | None = None
) -> list[float]:
    """Each row's time as a number that sorts as time does (seconds since 1970 for a date),
    by one rule for the whole column; a ConfigError naming the first value that fits it
    not, with its row (counted from 1)."""
    if not values:
        return []
    for row, value in enumerate(values, 1):
        if value.strip().lower() in _MISSING:
            raise ConfigError(
                f"{ordered_by} has no time at row {row} ({value!r}): a time split places every "
                "row in time; fill it in, or leave the row out"
            )
    if date_format is not None:
        return [_formatted(value, row, ordered_by, date_format) for row, value in _rows(values)]
    first = values[0].strip()
    if _number(first) is not None:
        return [_as_number(value, row, ordered_by) for row, value in _rows(values)]
    start = _iso(first)
    if start is not None:
        aware = start.tzinfo is not None
        return [_as_iso(value, row, ordered_by, aware) for row, value in _rows(values)]
    if _SLASHED.fullmatch(first):
        raise ConfigError(
            f"{ordered_by} holds dates such as {first!r} (row 1), whose day and month could be "
            'either way round: say which with data.order_format ("%d/%m/%Y" or "%m/%d/%Y"), '
            "or write them as ISO's YYYY-MM-DD"
        )
    raise ConfigError(
        f"{ordered_by} row 1 holds {first!r}, which is neither a number nor an ISO date "
        "(YYYY-MM-DD): a time split orders rows by one of the two, or by the format "
        "data.order_format gives"
    )


def _rows(values: Sequence[str]) -> list[tuple[int, str]]:
    return [(row, value.strip()) for row, value in enumerate(values, 1)]


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number


def _as_number(value: str, row: int, ordered_by: str) -> float:
    number = _number(value)
    if number is None or not math.isfinite(number):
        raise ConfigError(
            f"{ordered_by} row {row} holds {value!r} where the column's first row holds a "
            "number: a time split reads the whole column one way; give every row a finite "
            "number"
        )
    return number


def _iso(value: str) -> datetime | None:
    day = _ISO_DAY.fullmatch(value)
    try:
        if day is not None:  # unpadded months and days too: 2020-1-5
            year, month, date = (int(part) for part in day.groups())
            return datetime(year, month, date)
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if _ISO_DAY.match(value) else None  # a date first, not a bare time


def _as_iso(value: str, row: int, ordered_by: str, aware: bool) -> float:
    """An ISO date as seconds; with a time zone where the column's first has one, without
    where it has none (a moment without one could be any of a day's zones)."""
    parsed = _iso(value)
    if parsed is not None and (parsed.tzinfo is not None) != aware:
        raise ConfigError(
            f"{ordered_by} row {row} holds {value!r}, "
            + ("without" if aware else "with")
            + " a time zone, where the column's first row has "
            + ("one" if aware else "none")
            + ": give every time in the column the same way"
        )
    if parsed is None:
        raise ConfigError(
            f"{ordered_by} row {row} holds {value!r} where the column's first row holds an ISO "
            "date: a time split reads the whole column one way; write every date as "
            "YYYY-MM-DD (a time after it or not)"
        )
    return _seconds(parsed)


def _formatted(value: str, row: int, ordered_by: str, date_format: str) -> float:
    try:
        return _seconds(datetime.strptime(value, date_format))
    except ValueError:
        raise ConfigError(
            f"{ordered_by} row {row} holds {value!r}, which is not a date written as "
            f"data.order_format {date_format!r} says"
        ) from None


def _seconds(moment: datetime) -> float:
    """A moment as seconds since 1970 (one without a time zone read as UTC: a column's
    moments are all with one or all without, so they compare)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
