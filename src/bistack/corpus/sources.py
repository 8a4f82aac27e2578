"""Where corpus prediction reads its texts: one record at a time, so that memory stays flat
however long the input, and a pipe's lines are predicted as they arrive.

A record is a value to predict (a raw text, a pre-tokenised sentence's tokens, or whatever a
JSON field or Parquet cell holds: the model's card says which inputs it takes), or why it could
not be read; each knows where it came from (``line`` in text files, ``row`` in tables), for
messages and for the skipped-records file. Formats:

- ``lines``: one text a line, split on ``\\n`` alone (U+2028, U+0085 and form feeds stay inside
  their line), a byte-order mark and a ``\\r`` before each ``\\n`` dropped, blank lines kept so
  that output record N is input line N;
- ``tokenized``: one sentence a line, its tokens split on whitespace;
- ``conll``: CoNLL columns, the first one the tokens (a tag column is ignored), read by the
  rules training and evaluation use (``bistack.data.conll``): a blank line after each
  sentence, ``-DOCSTART-`` lines and comments skipped, a ``#hashtag`` token kept;
- ``conllu``: CoNLL-U, the FORM column the tokens (comments, multiword-token ranges and empty
  nodes skipped);
- ``jsonl``: one JSON object a line, the value in ``field`` (a text; a list of strings is a
  pre-tokenised sentence; an object, for a kind that takes one); blank lines are not records;
- ``csv``, ``tsv``: a header row naming ``field``;
- ``parquet``: a string column ``field`` (read in record batches with pyarrow).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

from bistack.data.conll import BadLine, layout_of, parse_conll
from bistack.data.conllu import parse_conllu
from bistack.errors import ConfigError, DataError, needs_extra
from bistack.inputs import Record

INPUT_FORMATS = ("lines", "tokenized", "conll", "conllu", "jsonl", "csv", "tsv", "parquet")
TOKEN_FORMATS = frozenset({"tokenized", "conll", "conllu"})  # what only a tagger can read
BY_SUFFIX = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".conll": "conll",
    ".conllu": "conllu",
}


def input_format(
    source: str, chosen: str | None, tokenized: bool, takes_tokens: bool = False
) -> str:
    """The format to read ``source`` in: ``chosen``, else ``tokenized`` lines, else the one
    its suffix names; any other file is CoNLL columns when its first lines are (and the model
    takes tokens: ``train`` and ``evaluate`` read a tagger's ``.txt`` data so), else one text a
    line, as stdin is."""
    if chosen is not None and tokenized and chosen != "tokenized":
        raise ConfigError(f"--tokenized reads one sentence a line; it cannot read {chosen}")
    if tokenized:
        return "tokenized"
    if chosen is not None:
        return chosen
    if source == "-":
        return "lines"
    named = BY_SUFFIX.get(Path(source).suffix.lower())
    if named is not None:
        return named
    return sniffed_format(Path(source)) if takes_tokens else "lines"


SNIFFED_LINES = 200  # how many of a file's first lines say whether it is CoNLL columns
_TAG = re.compile(r"^(O|[BIESLU]-\S+)$")  # an entity tag in any of the schemes


def sniffed_format(path: Path) -> str:
    """How a file whose suffix names no format reads, for a model that takes tokens: ``conll``
    when its first lines are CoNLL columns (a ``-DOCSTART-`` line first, or every line but
    blank lines and comments, as the CoNLL reader tells them, of the same two or more columns
    whose last is an entity tag, with a blank line between sentences), else ``lines``, one text
    a line. A text a line rarely is CoNLL: its last word would have to be a tag on every line.
    A file mostly of CoNLL columns with a line that is not (a header, a line of text) is a
    DataError naming that line: neither reading would be right."""
    try:
        with path.open("rb") as handle:
            head = [handle.readline() for _ in range(SNIFFED_LINES)]
    except OSError:
        return "lines"  # reading it says why, with its name
    lines = [line.decode("utf-8", "replace").strip() for line in head if line]
    numbered = [(n, line.split()) for n, line in enumerate(lines, start=1) if line]
    first = next((c for _, c in numbered if not c[0].startswith("#")), None)
    if first is None:
        return "lines"
    if first[0] == "-DOCSTART-":
        return "conll"
    layout = layout_of(first, tag_column=-1, plain=None)  # comments as the reader sees them
    filled = [(n, c) for n, c in numbered if not c[0].startswith("#") or not layout.is_comment(c)]
    tagged = [(n, c) for n, c in filled if len(c) >= 2 and _TAG.match(c[-1])]
    if not tagged:
        return "lines"
    width, where = len(tagged[0][1]), tagged[0][0]
    columns = [(n, c) for n, c in tagged if len(c) == width]
    others = [(n, c) for n, c in filled if len(c) != width or not _TAG.match(c[-1])]
    if not others:
        sentences_end = "" in lines[: len(lines) - 1] or len(lines) < SNIFFED_LINES
        return "conll" if sentences_end else "lines"
    if 2 * len(columns) < len(filled):
        return "lines"  # texts, a few of which happen to end in a tag-like word
    number, line = others[0]
    raise DataError(
        str(path),
        f"{' '.join(line)!r} is not CoNLL columns, but the lines around it are (a token and its "
        f"tags a line, as on line {where}): give --input-format conll to read the columns (such "
        "a line then fails alone), or --input-format lines to read one text a line",
        number,
    )


ID_FORMATS = ("jsonl", "csv", "tsv", "parquet")  # records with fields, one of which an id


def read_records(
    source: str, fmt: str, field: str = "text", id_field: str | None = None
) -> Iterator[Record]:
    """The records of ``source`` (a path, or ``-`` for stdin) read as ``fmt``, lazily; each
    carries its ``id_field`` when one is named (JSON lines, CSV, TSV and Parquet only)."""
    if id_field is not None and fmt not in ID_FORMATS:
        raise ConfigError(
            f"--id-field {id_field}: {fmt} input has no fields; ids come from JSON lines, CSV, "
            "TSV or Parquet records (a line's own place is in its 'line' already)"
        )
    if fmt == "parquet":
        if source == "-":
            raise ConfigError("Parquet cannot be read from stdin: give its path")
        yield from _parquet(source, field, id_field)
        return
    with _binary(source) as handle:
        if fmt in ("lines", "tokenized"):
            for number, text, error in _decoded_lines(handle):
                value = text.split() if fmt == "tokenized" and error is None else text
                yield Record(value=value, error=error, what="the line", line=number)
        elif fmt == "conll":
            yield from _conll(handle)
        elif fmt == "conllu":
            yield from _conllu(handle)
        elif fmt == "jsonl":
            yield from _jsonl(handle, field, id_field)
        elif fmt in ("csv", "tsv"):
            yield from _table(handle, source, field, "\t" if fmt == "tsv" else ",", id_field)
        else:
            raise ConfigError(f"unknown input format {fmt!r} (known: {', '.join(INPUT_FORMATS)})")


class _binary:
    """``source`` opened for bytes (stdin is not closed); a missing file is a DataError."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.handle: BinaryIO | None = None

    def __enter__(self) -> BinaryIO:
        if self.source == "-":
            return _stdin()
        try:
            self.handle = open(self.source, "rb")
        except FileNotFoundError:
            raise DataError(self.source, "no such file") from None
        except IsADirectoryError:
            raise DataError(self.source, "is a folder; give a file") from None
        return self.handle

    def __exit__(self, *exc: object) -> None:
        if self.handle is not None:
            self.handle.close()


def input_fields(source: str, fmt: str) -> set[str]:
    """The fields the records of ``source`` (read as ``fmt``) hold, read from its head alone
    (a table's header, the first JSON line, Parquet's schema); empty where there are none to
    read without consuming the input (stdin, line formats) or the head cannot be read."""
    if source == "-" or fmt not in ID_FORMATS:
        return set()
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return set(pq.read_schema(source).names)
        with open(source, encoding="utf-8-sig", newline="") as handle:
            if fmt == "jsonl":
                first = next((line for line in handle if line.strip()), "{}")
                record = json.loads(first)
                return set(record) if isinstance(record, dict) else set()
            header = next(csv.reader(handle, delimiter="\t" if fmt == "tsv" else ","), [])
            return {name.strip() for name in header}
    except (OSError, ValueError, ImportError):
        return set()  # reading the records says what is wrong, naming the line


def _stdin() -> BinaryIO:
    """Standard input for bytes, through a buffer of its own: the records are read on a thread
    (``chunked``), and a thread blocked in ``sys.stdin``'s own buffer when an interrupt ends
    the command would hold its lock through the interpreter's shutdown, which then aborts.
    A stdin replaced by a text stream (tests, notebooks) is read as it is."""
    try:
        descriptor = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return cast(BinaryIO, getattr(sys.stdin, "buffer", sys.stdin))
    return cast(BinaryIO, io.BufferedReader(io.FileIO(descriptor, "rb", closefd=False)))


def _decoded_lines(handle: BinaryIO) -> Iterator[tuple[int, str, str | None]]:
    """(line number, text, error) for each line: bytes split on ``\\n`` only."""
    for number, raw in enumerate(handle, start=1):
        if isinstance(raw, str):  # a stdin replaced by a text stream (tests, notebooks)
            raw = raw.encode("utf-8")
        raw = raw.removesuffix(b"\n").removesuffix(b"\r")
        try:
            yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8"), None
        except UnicodeDecodeError as error:
            message = f"not valid UTF-8 (byte {raw[error.start]:#04x} at column {error.start + 1})"
            yield number, "", message


def _conll(handle: BinaryIO) -> Iterator[Record]:
    """CoNLL columns by the rules training and evaluation read them with
    (``bistack.data.conll.parse_conll``), the first column the tokens, tags unread."""
    lines = (
        (number, BadLine(number, error) if error is not None else text)
        for number, text, error in _decoded_lines(handle)
    )
    for item in parse_conll(lines, tag_column=None, plain=None):
        if isinstance(item, BadLine):
            yield Record(error=item.problem, line=item.number)
        else:
            yield Record(value=item.tokens, what="the sentence", line=item.line)


def _conllu(handle: BinaryIO) -> Iterator[Record]:
    """CoNLL-U by the rules training and evaluation read it with
    (``bistack.data.conllu.parse_conllu``), the words of each sentence, tags unread."""
    lines = (
        (number, BadLine(number, error) if error is not None else text)
        for number, text, error in _decoded_lines(handle)
    )
    for item in parse_conllu(lines, tag_field=None):
        if isinstance(item, BadLine):
            yield Record(error=item.problem, line=item.number)
        else:
            yield Record(value=item.tokens, what="the sentence", line=item.line)


def _jsonl(handle: BinaryIO, field: str, id_field: str | None) -> Iterator[Record]:
    for number, text, error in _decoded_lines(handle):
        if error is None and not text.strip():
            continue
        if error is None:
            try:
                value = json.loads(text)
            except json.JSONDecodeError as bad:
                error = f"not JSON ({bad.msg} at column {bad.colno})"
        if error is not None:
            yield Record(error=error, line=number)
        elif not isinstance(value, dict):
            yield Record(error=f"expected a JSON object, found {type(value).__name__}", line=number)
        elif id_field is not None and id_field not in value:
            yield Record(error=f"no id field {id_field!r} (see --id-field)", line=number)
        else:
            record = from_value(value.get(field), field, "field", line=number, known=list(value))
            yield with_id(record, id_field, value.get(id_field))


def from_value(
    value: object,
    field: str,
    what: str,
    known: list[str] | None = None,
    line: int | None = None,
    row: int | None = None,
) -> Record:
    """A record from a table cell or JSON value (whether the model takes it is its card's
    business); a field the object lacks is an error that names ``field`` (``known``: the
    fields the object has)."""
    if value is None and known is not None and field not in known:
        shown = ", ".join(repr(name) for name in known[:8]) or "none"
        return Record(error=f"no {what} {field!r} (its fields: {shown})", line=line, row=row)
    return Record(value=value, what=f"{what} {field!r}", line=line, row=row)


def with_id(record: Record, id_field: str | None, value: Any) -> Record:
    """``record`` carrying ``id_field``'s value, when one is named."""
    if id_field is None:
        return record
    if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN to carry it in
        error = f"its id field {id_field!r} is {value}, not a finite number or text"
        return Record(error=error, line=record.line, row=record.row)
    return Record(
        record.value, record.error, record.what, record.line, record.row, {id_field: value}
    )


def _table(
    handle: BinaryIO, source: str, field: str, delimiter: str, id_field: str | None
) -> Iterator[Record]:
    # surrogateescape: a bad byte costs its own row, not the rest of the file.
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="surrogateescape", newline="")
    try:
        reader = csv.reader(text, delimiter=delimiter)
        header = next(reader, None)
        if header is None:
            raise DataError(source, "empty: expected a header row")
        if field not in header:
            raise DataError(
                source, f"no column {field!r} (columns: {', '.join(header)}); see --text-field", 1
            )
        column = header.index(field)
        if id_field is not None and id_field not in header:
            raise DataError(
                source, f"no column {id_field!r} (columns: {', '.join(header)}); see --id-field", 1
            )
        id_column = header.index(id_field) if id_field is not None else None
        name, row = "TSV" if delimiter == "\t" else "CSV", 0
        while True:
            line = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                row += 1
                yield Record(error=f"not readable as {name} ({error})", line=line, row=row)
                continue
            if not cells:  # a blank line is not a row
                continue
            row += 1
            if len(cells) != len(header):
                found = f"{len(cells)} cells, the header has {len(header)}"
                yield Record(error=found, line=line, row=row)
            elif _has_bad_bytes(cells[column]):
                yield Record(error="not valid UTF-8", line=line, row=row)
            else:
                record = Record(value=cells[column], what=f"column {field!r}", line=line, row=row)
                yield with_id(record, id_field, None if id_column is None else cells[id_column])
    finally:
        text.detach()  # the handle is closed by its owner


def _has_bad_bytes(text: str) -> bool:
    return any("\udc80" <= char <= "\udcff" for char in text)


def _parquet(source: str, field: str, id_field: str | None) -> Iterator[Record]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ConfigError(needs_extra("reading Parquet", "parquet", error)) from None
    try:
        parquet = pq.ParquetFile(source)
    except FileNotFoundError:
        raise DataError(source, "no such file") from None
    except (pa.ArrowInvalid, OSError) as error:
        raise DataError(source, f"not a readable Parquet file ({error})") from None
    names = parquet.schema_arrow.names
    if field not in names:
        raise DataError(
            source, f"no column {field!r} (columns: {', '.join(names)}); see --text-field"
        )
    kind = parquet.schema_arrow.field(field).type
    if not (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
    ):
        raise DataError(source, f"column {field!r} holds {kind}, not text")
    if id_field is not None and id_field not in names:
        raise DataError(
            source, f"no column {id_field!r} (columns: {', '.join(names)}); see --id-field"
        )
    columns = [field] if id_field is None or id_field == field else [field, id_field]
    row = 0
    for batch in parquet.iter_batches(batch_size=1024, columns=columns):
        values = batch.column(0).to_pylist()
        ids = batch.column(len(columns) - 1).to_pylist()
        for value, identity in zip(values, ids, strict=True):
            row += 1
            yield with_id(from_value(value, field, "column", row=row), id_field, identity)


def count_records(source: str, fmt: str) -> int | None:
    """About how many records ``source`` holds, counted cheaply for a progress bar's total
    (lines, or Parquet's row count; None for stdin and for sentences in CoNLL files)."""
    if source == "-" or fmt in ("conll", "conllu"):
        return None
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(source).metadata.num_rows)
        lines, last = 0, b"\n"
        with open(source, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                lines += block.count(b"\n")
                last = block[-1:]
        lines += last != b"\n"
        return max(lines - (fmt in ("csv", "tsv")), 0)
    except (OSError, ImportError):
        return None
