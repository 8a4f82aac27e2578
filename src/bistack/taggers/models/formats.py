"""The output formats taggers write beside the JSON lines every kind writes: CoNLL columns,
CoNLL-U and doccano's span JSON lines, and a tagger's table (``predict --format csv``: a row an
entity, as a competition takes it); declared on the tagging family's cards; torch-free."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bistack.cards import CSV, JSONL, TSV, OutputFormat
from bistack.files.formats import joined, json_line, table_line

# An entity table's columns after the record's id (or row): character offsets into the text
# (end exclusive), the entity's type and text, and its confidence.
ENTITY_COLUMNS = ("start", "end", "type", "text", "confidence")


@dataclass(frozen=True)
class EntityTable:
    """A tagger's predictions as a table: one row an entity, in the text's order, after its
    record's id (``id_field``) or row; a text without any entity has one row whose type and
    other cells are empty, so that every record is there."""

    delimiter: str
    id_field: str | None

    @property
    def head(self) -> str:
        return table_line([self.id_field or "row", *ENTITY_COLUMNS], self.delimiter)

    def row(self, prediction: Any, extra: dict[str, Any] | None = None) -> str:
        """The record's lines: one an entity, or one with an empty type."""
        extra = extra or {}
        place = extra.get("row", extra.get("line", ""))
        first = extra.get(self.id_field, "") if self.id_field else place
        entities = prediction.to_json()["entities"]
        if not entities:
            return table_line([first, "", "", "", "", ""], self.delimiter)
        return "".join(
            table_line(
                [first, e["start"], e["end"], e["type"], e["text"], repr(e["confidence"])],
                self.delimiter,
            )
            for e in entities
        )


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
FORMATS = (CONLL, JSONL, CONLLU, DOCCANO, CSV, TSV)  # CoNLL columns first: a tagger's default
