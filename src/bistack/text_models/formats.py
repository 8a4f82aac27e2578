"""A text model's table (``predict --format csv`` or ``tsv``, declared in ``bistack.cards``): a
submission takes it as it is; torch-free.

A table's columns: the id each record keeps (``--id-field``, or the model's ``data.id_column``
where the input has it), else ``row`` (each record's row in a table, line in a file, or place
among the arguments, counted from 1 as ``oof.csv`` counts), then the label (under the training
label column's name) or each target's value (under its own), then, with ``--probabilities``,
each class's probability (``p_<label>``). A blank text has empty cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bistack.cards import PredictOption
from bistack.files.formats import table_line

ROW = "row"  # a table's first column where its records have no id


@dataclass(frozen=True)
class Table:
    """Delimited lines of a text model's predictions: ``head`` (the columns), then a ``row``
    a prediction."""

    delimiter: str
    id_field: str | None
    columns: list[str]  # after the id's
    probabilities: bool

    @property
    def head(self) -> str:
        return self.line([self.id_field or ROW, *self.columns])

    def row(self, prediction: Any, extra: dict[str, Any] | None = None) -> str:
        """The prediction's line, after its record's id, or its place where it has none."""
        extra = extra or {}
        place = extra.get("row", extra.get("line", ""))
        first = extra.get(self.id_field, "") if self.id_field else place
        made = prediction.table_cells(self.probabilities)
        return self.line([first, *(made or [""] * len(self.columns))])

    def line(self, cells: list[Any]) -> str:
        return table_line(cells, self.delimiter)


def table_of(delimiter: str, model: Any, id_field: str | None, options: dict[str, Any]) -> Table:
    """The table of ``model``'s predictions: its outputs name the columns."""
    chosen = bool(options.get("probabilities"))
    label_column = model.config.data.label_columns[0]
    columns = model.outputs.table_columns(label_column, chosen)
    return Table(delimiter, id_field, columns, chosen)


PROBABILITIES = PredictOption(
    "probabilities",
    bool,
    "a p_<label> column of each class's probability",
    default=False,
    formats=("csv", "tsv"),
    for_writer=True,
)
