"""A text model's prediction for one text, as plain data (no torch), so every outlet (the CLI,
the server, the ONNX runtime) writes the same record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bistack.data.tokenize import Token
from bistack.inputs import texts_of


@dataclass(frozen=True)
class TextPrediction:
    """A prediction for one text.

    Classification: ``label`` and ``probabilities``. Regression: ``values`` per target, in the
    original units. ``attention``: (token, weight) pairs when asked for and the pooling has them.
    """

    text: str
    label: str | None = None
    probabilities: dict[str, float] | None = None
    values: dict[str, float] | None = None
    attention: list[tuple[Token, float]] | None = None

    def table_cells(self, probabilities: bool) -> list[Any]:
        """Its cells in a table's row: the label (then, with ``probabilities``, each class's
        probability) or each target's value; none for a blank text."""
        if self.label is not None:
            shown = list((self.probabilities or {}).values()) if probabilities else []
            return [self.label, *shown]
        return list(self.values.values()) if self.values is not None else []

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"text": self.text}
        if self.label is not None:
            record |= {"label": self.label, "probabilities": self.probabilities}
        elif self.values is not None:
            record["values"] = self.values  # neither: a blank text, which has no prediction
        if self.attention is not None:
            record["attention"] = [
                {"text": t.text, "start": t.start, "end": t.end, "weight": w}
                for t, w in self.attention
            ]
        return record


def with_blank_texts(
    texts: Sequence[str], predict: Callable[[list[str]], list[TextPrediction]]
) -> list[TextPrediction]:
    """One prediction per text (a single string is one text; any iterable of strings is read
    once): ``predict`` gets the texts that are not blank, and a blank text gets an empty
    prediction, so results stay aligned."""
    texts = texts_of(texts)
    filled = [i for i, text in enumerate(texts) if text.strip()]
    predictions = [TextPrediction(text) for text in texts]
    if filled:
        made = predict([texts[i] for i in filled])
        for index, prediction in zip(filled, made, strict=True):
            predictions[index] = prediction
    return predictions
