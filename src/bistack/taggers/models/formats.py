"""The output formats only taggers write, beside the JSON lines every kind writes: CoNLL columns,
CoNLL-U and doccano's span JSON lines (declared on the tagging family's cards; torch-free)."""

from __future__ import annotations

from typing import Any

from bistack.cards import JSONL, OutputFormat
from bistack.files.formats import joined, json_line


def conll_block(prediction: Any, extra: dict[str, Any] | None = None) -> str:
    """``token<TAB>tag`` lines with a blank line after each sentence (CoNLL has no place for
    ``extra``)."""
    return str(prediction.to_conll())


def conllu_block(prediction: Any, extra: dict[str, Any] | None = None) -> str:
    """CoNLL-U sentences, each with its ``# text``."""
    return str(prediction.to_conllu())


def doccano_line(prediction: Any, extra: dict[str, Any] | None = None) -> str:
    """The text and its entities as a doccano JSON line, to load back into an annotation tool
    (which keeps ``extra``'s fields as the record's metadata)."""
    return json_line(joined(extra, prediction.to_doccano()))


CONLL = OutputFormat(
    "conll",
    "token and tag columns, a blank line after each sentence",
    conll_block,
    suffixes=(".conll",),
)
CONLLU = OutputFormat(
    "conllu", "CoNLL-U sentences with their # text", conllu_block, suffixes=(".conllu",)
)
DOCCANO = OutputFormat("doccano", "span JSON lines an annotation tool loads back", doccano_line)
FORMATS = (CONLL, JSONL, CONLLU, DOCCANO)  # CoNLL columns first: a tagger's default
