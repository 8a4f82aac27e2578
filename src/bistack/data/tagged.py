"""Tagged sentences from any of the formats tagging trains on: CoNLL, CoNLL-U, span JSON lines.

The config's ``data`` section says which (``format``, by the file's extension when ``auto``),
which column holds the tags, and whether tags are entity tags or labels of their own
(``scheme: none``, e.g. parts of speech).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bistack.data.conll import Sentence, read_conll
from bistack.data.conllu import read_conllu
from bistack.data.spans import SpanReport, read_spans
from bistack.schemes import PLAIN

SUFFIXES = {".conllu": "conllu", ".jsonl": "spans", ".json": "spans"}


def tagged_format(path: str | Path, declared: str = "auto") -> str:
    """``conll``, ``conllu`` or ``spans``: as declared, else by extension (CoNLL otherwise)."""
    if declared != "auto":
        return declared
    return SUFFIXES.get(Path(path).suffix.lower(), "conll")


def read_tagged(path: str | Path, data: Any, report: SpanReport | None = None) -> list[Sentence]:
    """Sentences with gold tags from ``path`` as a tagging config's ``data`` section says.

    Span files are written in ``data.scheme`` (config validation keeps ``none`` from them).
    """
    plain = data.scheme == PLAIN
    fmt = tagged_format(path, data.format)
    if fmt == "conllu":
        return read_conllu(path, data.tag_field, plain=plain)
    if fmt == "spans":
        return read_spans(path, data.scheme, misaligned=data.misaligned_spans, report=report)
    return read_conll(path, data.token_column, data.tag_column, plain=plain)
