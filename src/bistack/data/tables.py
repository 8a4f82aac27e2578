"""Tables of texts and labels: TSV, CSV, JSON lines, Parquet, a HuggingFace ``datasets``
folder, or rows handed over from Python, with the columns named in the config.

Rows are numbered from 1 after the header (TSV, CSV), by line (JSON lines), or from 1 in the
table's order (Parquet, datasets, rows from Python), so an error can point at the row to fix.

- Parquet needs ``bistack[parquet]`` (pyarrow); a HuggingFace dataset folder (what
  ``Dataset.save_to_disk`` writes; for a ``DatasetDict``, the folder of one split) needs
  ``bistack[datasets]``.
- ``memory:NAME`` reads rows handed over to :func:`bistack.train` (a ``datasets.Dataset``, a
  pandas DataFrame or a list of dicts): the name a config records for data that came from Python.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.errors import DataError, needs_extra

CSV_FIELD_LIMIT = 1 << 24  # characters; long documents are fine, silent truncation is not


@dataclass(frozen=True)
class Example:
    """One row: its text, the raw values of the label columns (empty if unlabelled), its row."""

    text: str
    labels: tuple[str, ...]
    row: int


MEMORY = "memory:"  # the prefix of a table handed over from Python
# Tables handed over from Python, by the source name a config records for each
# (``memory:train``): passed along with the config to whatever reads it, never kept globally.
Tables = Mapping[str, Any]


def memory_sources(**tables: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """``name=rows`` as the source strings for a config's ``data`` section (``memory:NAME``)
    and the tables by those names, for ``read_table(..., tables=)``."""
    names = {name: f"{MEMORY}{name}" for name in tables}
    return names, {names[name]: rows for name, rows in tables.items()}


def table_format(path: str | Path, declared: str = "auto") -> str:
    if declared != "auto":
        return declared
    if str(path).startswith(MEMORY):
        return "memory"
    if Path(path).is_dir():
        return "datasets"
    suffix = Path(path).suffix.lower()
    formats = {
        ".tsv": "tsv",
        ".csv": "csv",
        ".jsonl": "jsonl",
        ".json": "jsonl",
        ".parquet": "parquet",
    }
    if suffix not in formats:
        raise DataError(
            path,
            "cannot tell the format from the extension; set data.format to tsv, csv, jsonl, "
            "parquet or datasets (a HuggingFace dataset folder)",
        )
    return formats[suffix]


def read_table(
    path: str | Path,
    text_column: str,
    label_columns: Sequence[str],
    *,
    file_format: str = "auto",
    labelled: bool = True,
    tables: Tables | None = None,
) -> list[Example]:
    """Read examples; ``labelled=False`` ignores label columns (for prediction); ``tables``:
    the rows handed over from Python, for a ``memory:NAME`` path."""
    wanted = [text_column, *(label_columns if labelled else [])]
    examples = []
    kind = table_format(path, file_format)
    for row, record in _records(path, kind, tables or {}):
        missing = [c for c in wanted if c not in record]
        if missing:
            where = {"row": row} if kind in ("jsonl", "memory") else {}  # a header names columns
            raise DataError(
                path, f"no column {missing[0]!r} (columns: {', '.join(record)})", **where
            )
        text = record[text_column]
        if not isinstance(text, str) or not text.strip():
            raise DataError(path, f"empty text in column {text_column!r}", row=row)
        labels = tuple(label_value(record[c], c, path, row) for c in wanted[1:])
        examples.append(Example(text, labels, row))
    if not examples:
        raise DataError(path, "no rows found: the file is empty or holds only a header")
    return examples


def label_value(value: object, column: str, path: str | Path, row: int) -> str:
    """A label as written: a class name or a number. Empty, null, a boolean, a list or an
    object is an error naming the row, never a class ``""`` or ``"True"``."""
    if isinstance(value, bool) or value is None or isinstance(value, list | dict):
        what = {bool: "a boolean", type(None): "null", list: "a list", dict: "an object"}
        raise DataError(
            path,
            f"label {column!r} is {what[type(value)]} ({json.dumps(value)}); expected a class "
            "name or a number",
            row=row,
        )
    label = str(value).strip()
    if not label:
        raise DataError(path, f"label {column!r} is empty", row=row)
    return label


def _records(path: str | Path, file_format: str, tables: Tables) -> Iterator[tuple[int, dict]]:
    if file_format == "memory":
        yield from enumerate(_memory_rows(path, tables), start=1)
        return
    if file_format in ("parquet", "datasets"):
        rows = {"parquet": _parquet_rows, "datasets": _dataset_rows}
        for number, record in enumerate(rows[file_format](path), start=1):
            yield number, record
        return
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise DataError(path, f"not valid UTF-8 (byte {raw[error.start]:#04x})", line) from None
    if file_format == "jsonl":
        # Records end at "\n" alone: U+2028 and friends are valid inside JSON strings.
        for number, record_line in enumerate(text.split("\n"), start=1):
            if not record_line.strip():
                continue
            try:
                record = json.loads(record_line)
            except json.JSONDecodeError as error:
                raise DataError(path, f"not a JSON object ({error.msg})", row=number) from None
            if not isinstance(record, dict):
                raise DataError(path, "not a JSON object", row=number)
            yield number, record
        return
    if file_format == "tsv":
        yield from _tsv_records(path, text)
        return
    header, records = _csv_records(text)
    for number, record in enumerate(records, start=1):
        if None in record:  # more fields than the header
            raise DataError(
                path,
                f"{len(header) + len(record[None])} fields, the header has {len(header)}",
                row=number,
            )
        yield number, record


def _parquet_rows(path: str | Path) -> Iterator[dict]:
    try:
        import pyarrow.parquet as parquet
    except ImportError as error:
        raise DataError(path, needs_extra("reading Parquet", "parquet", error)) from None
    if not Path(path).exists():
        raise DataError(path, "no such file")
    try:
        table = parquet.ParquetFile(path)
    except Exception as error:  # pyarrow's errors have no common base it exports
        raise DataError(path, f"not a Parquet file ({error})") from None
    for batch in table.iter_batches(batch_size=4096):
        yield from batch.to_pylist()


def _dataset_rows(path: str | Path) -> Iterator[dict]:
    if not (Path(path) / "state.json").exists():
        splits = Path(path) / "dataset_dict.json"
        if splits.exists():
            names = json.loads(splits.read_text()).get("splits", [])
            raise DataError(
                path,
                f"a DatasetDict: point the config at one of its splits ({', '.join(names)}), "
                f"e.g. {Path(path) / (names[0] if names else 'train')}",
            )
        raise DataError(path, "a folder, but not one Dataset.save_to_disk wrote (no state.json)")
    try:
        from datasets import load_from_disk
    except ImportError as error:
        raise DataError(path, needs_extra("a HuggingFace dataset", "datasets", error)) from None
    yield from load_from_disk(str(path))


def _memory_rows(source: str | Path, tables: Tables) -> Iterator[dict]:
    if str(source) not in tables:
        raise DataError(source, "no rows were handed over under this name (see bistack.train)")
    rows = tables[str(source)]
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        rows = rows.to_dict("records")
    for row in rows:
        yield dict(row)


def _csv_records(text: str) -> tuple[list[str], list[dict]]:
    """The header and the records of CSV ``text``, read with the csv module's field limit
    raised to ``CSV_FIELD_LIMIT`` for this read only (the limit is process-wide)."""
    previous = csv.field_size_limit(CSV_FIELD_LIMIT)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        records = list(reader)
        return list(reader.fieldnames or []), records
    finally:
        csv.field_size_limit(previous)


def _tsv_records(path: str | Path, text: str) -> Iterator[tuple[int, dict]]:
    """TSV as IANA defines it: a record per ``\\n`` line, fields split on tabs, no quoting.

    Fields are stripped of surrounding whitespace: SST-2's files carry a stray carriage return
    before the tab, which a CSV reader would take for the end of the record.
    """
    lines = text.split("\n")
    header = [field.strip() for field in lines[0].split("\t")]
    for number, line in enumerate(lines[1:], start=1):
        if not line.strip():
            continue
        values = [field.strip() for field in line.split("\t")]
        if len(values) != len(header):
            raise DataError(path, f"{len(values)} fields, the header has {len(header)}", row=number)
        yield number, dict(zip(header, values, strict=True))


def class_ids(examples: Sequence[Example], labels: Sequence[str], path: str | Path) -> list[int]:
    """Each example's label as its index in ``labels``; a label never seen in training is a
    DataError naming its row."""
    index = {label: i for i, label in enumerate(labels)}
    for example in examples:
        if example.labels[0] not in index:
            raise DataError(
                path,
                f"label {example.labels[0]!r} never appeared in training "
                f"(known: {', '.join(labels)})",
                row=example.row,
            )
    return [index[e.labels[0]] for e in examples]


def parse_targets(
    examples: Sequence[Example], columns: Sequence[str], path: str | Path
) -> list[list[float]]:
    """``[example][target]`` floats from the label columns of ``examples``."""
    return [
        [parse_target(v, c, path, e.row) for v, c in zip(e.labels, columns, strict=True)]
        for e in examples
    ]


def parse_target(value: str, column: str, path: str | Path, row: int) -> float:
    """A regression target as a float; non-numbers and NaN are errors naming the row."""
    try:
        number = float(value)
    except ValueError:
        raise DataError(path, f"target {column!r} is not a number: {value!r}", row=row) from None
    if not math.isfinite(number):
        raise DataError(
            path, f"target {column!r} is {value!r}: it must be a finite number", row=row
        )
    return number
