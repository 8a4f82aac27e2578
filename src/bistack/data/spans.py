"""Span-annotated JSON lines, as annotation tools export them, read as tagged sentences.

One JSON object per line with the ``text`` and its entities as character spans ``[start, end)``:

- doccano: ``{"text": ..., "label": [[start, end, "PER"], ...]}``;
- Label Studio and others: ``{"text": ..., "entities": [{"start": 0, "end": 5, "label": "PER"}]}``
  (the list may also be called ``spans`` or ``labels``, and ``labels: ["PER"]`` stands for
  ``label``).

The text is tokenised with the tokenizer bistack uses on raw text at prediction time, so training
sees the tokens prediction will see, and each record is one training sequence. The spans become
tags in the model's scheme. A span whose ends do not fall on token boundaries ("New Yor" of
"New York") is an error naming its line, or with ``misaligned="snap"`` it is widened to the tokens
it touches and reported; it is never dropped. Overlapping spans cannot be written as tags and are
an error.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bistack.data.conll import Sentence, numbered_lines
from bistack.data.tokenize import Token, tokenize
from bistack.errors import DataError
from bistack.schemes import Span, tags_from_spans

SPAN_KEYS = ("label", "labels", "entities", "spans")


@dataclass
class SpanReport:
    """Spans widened to token boundaries: ``(line, "text" -> "widened text")`` each."""

    snapped: list[tuple[int, str, str]] = field(default_factory=list)


def read_spans(
    path: str | Path,
    scheme: str,
    *,
    misaligned: Literal["reject", "snap"] = "reject",
    text_field: str = "text",
    report: SpanReport | None = None,
    tokenizer: Callable[[str], list[list[Token]]] = tokenize,
) -> list[Sentence]:
    """Tagged sentences (tags in ``scheme``) from span JSON lines; each ``Sentence.line`` is
    its record's line, and its metadata holds the ``text``. A record is a document of its own,
    unless consecutive records name the same ``document`` (any JSON value)."""
    sentences: list[Sentence] = []
    document, previous = 0, None  # records of one "document" value in a row: one document
    for number, raw in numbered_lines(path):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(path, f"not a JSON object ({error.msg})", number) from None
        if not isinstance(record, dict):
            raise DataError(path, "not a JSON object", number)
        text = record.get(text_field)
        if not isinstance(text, str) or not text.strip():
            raise DataError(path, f"no text: expected a non-empty string in {text_field!r}", number)
        spans = _spans(record, text, path, number)
        tokens = [token for sentence in tokenizer(text) for token in sentence]
        aligned = [_align(s, tokens, text, path, number, misaligned, report) for s in spans]
        _check_overlaps(aligned, tokens, text, path, number)
        named = record.get("document")
        if named is None or named != previous or not sentences:
            document += 1 if sentences else 0
        previous = named
        sentences.append(
            Sentence(
                [t.text for t in tokens],
                tags_from_spans(aligned, len(tokens), scheme),
                number,
                {"text": text},
                document,
            )
        )
    if not sentences:
        raise DataError(path, "no records found: the file is empty")
    return sentences


def _spans(record: dict[str, Any], text: str, path: str | Path, number: int) -> list[Span]:
    """The record's spans as character offsets, checked against its text. A record with two
    span fields (``label`` and ``entities``, say) is read only when they hold the same spans:
    otherwise which one is meant cannot be known, and neither is dropped silently."""
    keys = [k for k in SPAN_KEYS if k in record]
    if not keys:
        raise DataError(
            path,
            f"no spans: expected one of {', '.join(SPAN_KEYS)} (an empty list if none)",
            number,
        )
    found = {key: _spans_in(record[key], key, text, path, number) for key in keys}
    first, *others = keys
    for other in others:
        if sorted(found[other]) != sorted(found[first]):
            raise DataError(
                path,
                f"two span fields that disagree: {first!r} has {len(found[first])} spans, "
                f"{other!r} has {len(found[other])}; keep the one that is meant",
                number,
            )
    return found[first]


def _spans_in(items: Any, key: str, text: str, path: str | Path, number: int) -> list[Span]:
    """The spans one field holds."""
    if not isinstance(items, list):
        raise DataError(path, f"{key!r} must be a list of spans", number)
    spans = []
    for item in items:
        if isinstance(item, list) and len(item) == 3:
            start, end, label = item
        elif isinstance(item, dict) and "start" in item and "end" in item:
            start, end = item["start"], item["end"]
            label = item.get("label", item.get("labels"))
            if isinstance(label, list) and len(label) == 1:
                label = label[0]
        else:
            raise DataError(
                path,
                f"span {json.dumps(item)}: expected [start, end, label] or "
                '{"start": ..., "end": ..., "label": ...}',
                number,
            )
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end))
        if not ok or not 0 <= start < end <= len(text):
            raise DataError(
                path,
                f"span {json.dumps(item)}: start and end must be offsets with 0 <= start < end "
                f"<= {len(text)} (the text's length)",
                number,
            )
        if not isinstance(label, str) or not label.strip():
            raise DataError(path, f"span {json.dumps(item)}: the label must be a type name", number)
        spans.append(Span(start, end, label))
    return spans


def _align(
    span: Span,
    tokens: Sequence[Token],
    text: str,
    path: str | Path,
    number: int,
    misaligned: str,
    report: SpanReport | None,
) -> Span:
    """``span`` (characters) as tokens ``[first, last + 1)``."""
    touched = [i for i, t in enumerate(tokens) if t.start < span.end and span.start < t.end]
    written = text[span.start : span.end]
    if not touched:
        raise DataError(path, f"span {written!r} ({span.start}-{span.end}) covers no token", number)
    first, last = touched[0], touched[-1]
    if tokens[first].start == span.start and tokens[last].end == span.end:
        return Span(first, last + 1, span.label)
    widened = text[tokens[first].start : tokens[last].end]
    if misaligned == "reject":
        raise DataError(
            path,
            f"span {written!r} ({span.start}-{span.end}, {span.label}) does not fall on token "
            f"boundaries: the tokens it touches are {widened!r}; fix the span, or set "
            "data.misaligned_spans to snap to widen it to them",
            number,
        )
    if report is not None:
        report.snapped.append((number, written, widened))
    return Span(first, last + 1, span.label)


def _check_overlaps(
    spans: Sequence[Span], tokens: Sequence[Token], text: str, path: str | Path, number: int
) -> None:
    ordered = sorted(spans)
    for before, after in itertools.pairwise(ordered):
        if after.start < before.end:
            one = text[tokens[before.start].start : tokens[before.end - 1].end]
            two = text[tokens[after.start].start : tokens[after.end - 1].end]
            raise DataError(
                path,
                f"spans {one!r} ({before.label}) and {two!r} ({after.label}) overlap; tags "
                "cannot express nested or overlapping entities: keep one",
                number,
            )


def doccano_record(text: str, entities: Sequence[tuple[int, int, str]]) -> dict[str, Any]:
    """A prediction in doccano's form, ``{"text", "label": [[start, end, type], ...]}``."""
    return {"text": text, "label": [[start, end, label] for start, end, label in entities]}
