"""What every model a user loads shares, so that outlets (the CLI, and later serving, export and
corpus prediction) handle each kind the same way, through the task table.

Wrappers are siblings that each satisfy these protocols; none subclasses another.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypeVar

from bistack.config import ExperimentConfig
from bistack.errors import ModelFileError

if TYPE_CHECKING:  # the outlets that run exported models import this module without torch
    import torch

T = TypeVar("T")


class Prediction(Protocol):
    """One text's prediction, as plain data (what ``predict --format jsonl`` prints)."""

    def to_json(self) -> dict[str, Any]: ...


class Report(Protocol):
    """An evaluation: readable as ``str()``, and as plain data for ``evaluate --json``."""

    def to_json(self) -> dict[str, Any]: ...


class Model(Protocol):
    """A trained model in a model directory: load, save, evaluate on labelled data."""

    KIND: ClassVar[str]  # the kind its config.json names
    config: ExperimentConfig

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> Self: ...

    def save(self, path: str | Path) -> None: ...
    def save_metadata(self, path: str | Path) -> None: ...
    def save_weights(self, path: str | Path) -> None: ...
    def evaluate(self, path: str | Path) -> Report: ...


class Predictor(Model, Protocol):
    """A model that labels raw texts."""

    @property
    def labels(self) -> list[str]: ...

    def predict(self, texts: Sequence[str]) -> Sequence[Prediction]: ...


def shown(batches: Iterable[T], show: bool) -> Iterable[T]:
    """``batches``, with a progress bar (batches per second) when ``show``."""
    from tqdm import tqdm

    return tqdm(batches, desc="predicting", unit="batch", disable=not show, leave=False)


def jsonl_line(prediction: Prediction) -> str:
    """One JSON object and a newline; a value that is not a number is an error, never NaN.
    Unicode line separators inside strings are written escaped, so that a reader splitting on
    any line break still sees one record a line."""
    try:
        line = json.dumps(prediction.to_json(), ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise ModelFileError(
            "the model predicted a value that is not a finite number; its weights or its "
            "calibration are broken: retrain it"
        ) from None
    for separator in LINE_SEPARATORS:
        line = line.replace(separator, f"\\u{ord(separator):04x}")
    return line + "\n"


LINE_SEPARATORS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"  # what str.splitlines also breaks at


def conll_block(prediction: Prediction) -> str:
    """``token<TAB>tag`` lines with a blank line after each sentence (taggers' predictions)."""
    return prediction.to_conll()  # type: ignore[attr-defined]


def conllu_block(prediction: Prediction) -> str:
    """CoNLL-U sentences, each with its ``# text`` (taggers' predictions)."""
    return prediction.to_conllu()  # type: ignore[attr-defined]


class _Doccano:
    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def to_json(self) -> dict[str, Any]:
        return self.record


def doccano_line(prediction: Prediction) -> str:
    """The text and its entities as a doccano JSON line, to load back into an annotation tool."""
    return jsonl_line(_Doccano(prediction.to_doccano()))  # type: ignore[attr-defined]


# How ``predict --format`` writes one prediction; the task table says which formats a kind has.
FORMATS: dict[str, Callable[[Prediction], str]] = {
    "jsonl": jsonl_line,
    "conll": conll_block,
    "conllu": conllu_block,
    "doccano": doccano_line,
}
