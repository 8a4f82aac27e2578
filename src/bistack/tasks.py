"""The task table: every model kind's card (``bistack.cards``), and the one way to open a model.

``TASKS`` maps the kind written to config.json (or export.json) to its card. The command line,
the server, corpus prediction, the Ray step, the studies and ``bistack.training`` look kinds up
here, and open models with :func:`open_model`, which opens a model directory and an exported
directory alike; nothing else branches on a model's kind or on whether it was exported. The
table imports no torch: behaviour is reached through the cards only when used. A new kind is
one :func:`register` call of a card naming its own modules.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from bistack.cards import Card, PredictOption
from bistack.config import ExperimentConfig
from bistack.config.files import (
    apply_override,
    build_config,
    kind_named,
    read_yaml,
    resolved_paths,
)
from bistack.errors import ConfigError, ModelFileError
from bistack.files.modeldir import model_kind, reading_model
from bistack.files.onnx_session import is_exported, read_export
from bistack.inputs import Input, described, unicode_problem
from bistack.language_models import cards as language_models
from bistack.taggers import cards as taggers
from bistack.text_models import cards as text_models


class Report(Protocol):
    """An evaluation: readable as ``str()``, and as plain data for ``evaluate --json``."""

    def to_json(self) -> dict[str, Any]: ...


class Model(Protocol):
    """What a card's loader gives: a trained model that loads, predicts (as its card's inputs
    say), scores labelled data and says what it is."""

    KIND: ClassVar[str]  # the kind its config.json names
    config: Any

    @classmethod
    def load(cls, path: str | Path, device: Any = "cpu") -> Self: ...

    def evaluate(self, path: str | Path) -> Report: ...
    def describe(self) -> dict[str, Any]: ...


TASKS: dict[str, Card] = {}


def register(card: Card) -> Card:
    """Add a kind to the table (a kind registered twice is an error, and so is an option
    another kind declares otherwise under the same name: the faces offer one of each)."""
    if card.kind in TASKS:
        raise ValueError(f"model kind {card.kind!r} is already registered")
    for option in card.predict_options:
        known = offered_options().get(option.name)
        if known is not None and known != option:
            raise ValueError(
                f"model kind {card.kind!r}: option {option.name!r} is declared otherwise by "
                "another kind; give it another name or the same declaration"
            )
    TASKS[card.kind] = card
    return card


def offered_options() -> dict[str, PredictOption]:
    """Every predict option of the registered kinds, by name, in the order they were
    registered: what the command line's flags and the server's request fields are built from."""
    options: dict[str, PredictOption] = {}
    for card in TASKS.values():
        for option in card.predict_options:
            options.setdefault(option.name, option)
    return options


def offered_formats() -> list[str]:
    """Every ``predict --format`` of the registered kinds, each once, in registration order."""
    return list(dict.fromkeys(f for card in TASKS.values() for f in card.predict_formats))


def asked_options(values: dict[str, Any]) -> dict[str, Any]:
    """Of the registered kinds' options as a face holds them all (a flag or a request field
    for each), those that ask for something: not None and not at their declared default."""
    offered = offered_options()
    return {
        name: value
        for name, value in values.items()
        if value is not None and not (name in offered and offered[name].asks_nothing(value))
    }


def kinds_offering(option: str) -> list[Card]:
    """The registered kinds whose ``predict`` takes ``option``."""
    return [card for card in TASKS.values() if card.offers(option)]


for _card in (*taggers.CARDS, *text_models.CARDS, *language_models.CARDS):
    register(_card)


def task_of(kind: str, source: str = "config") -> Card:
    """The card of ``kind``; an unknown kind is an error that lists the known ones."""
    if kind not in TASKS:
        raise ConfigError(
            f"{source}: unknown model kind {kind!r} (known: {', '.join(sorted(TASKS))})"
        )
    return TASKS[kind]


def config_from_dict(data: dict[str, Any], source: str = "config") -> ExperimentConfig:
    """The validated config of the kind ``data`` names (``kind``, or an earlier version's
    ``task``); a config without either is a tagger's, as it always was."""
    return build_config(task_of(kind_named(data, source), source).config_class, data, source)


def read_config_file(path: str | Path, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """A YAML config file as a mapping, the files it names (its kind's ``INPUT_KEYS``: data,
    pretrained vectors, a backbone folder) made absolute from the config's own folder, so
    that a config means the same files from any working directory. ``say`` hears a path found
    only from the working directory, as earlier versions read it (stderr when None)."""
    data = read_yaml(path)
    config_class = task_of(kind_named(data, str(path)), str(path)).config_class
    for warning in resolved_paths(data, config_class.INPUT_KEYS, Path(path).parent, str(path)):
        (say or (lambda text: print(text, file=sys.stderr)))(f"warning: {warning}")
    return data


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML config (:func:`read_config_file`) and apply ``key.sub=value`` overrides
    (values parsed as YAML; a path given so is read from the working directory, as the shell
    reads it)."""
    data = read_config_file(path)
    for override in overrides or []:
        apply_override(data, override)
    return config_from_dict(data, source=str(path))


def task_of_directory(path: str | Path) -> Card:
    """The card of the kind a model directory or an exported directory holds."""
    kind = read_export(path)["kind"] if is_exported(path) else model_kind(path)
    if kind not in TASKS:
        raise ModelFileError(
            f"{path}: holds a model of kind {kind!r}, which this bistack does not know "
            f"(known: {', '.join(sorted(TASKS))})"
        )
    return TASKS[kind]


@dataclass(frozen=True)
class Opened:
    """A model opened for the outlets: its card, the model (PyTorch, or an exported one on
    onnxruntime: both predict, score and describe themselves alike), where it came from."""

    card: Card
    model: Any
    path: Path
    exported: bool

    @property
    def description(self) -> str:
        return f"{self.card.description} (exported)" if self.exported else self.card.description

    def input_of(self, value: Any) -> Input:
        """The card's input that takes ``value``; ValueError saying what it takes otherwise."""
        chosen = self.card.input_of(value)
        if chosen is None:
            raise ValueError(
                f"{self.description} predicts from {described(self.card.inputs)}, "
                f"not {type(value).__name__} {value!r:.60}"
            )
        return chosen

    def predict(self, values: Sequence[Any], **options: Any) -> list[Any]:
        """Predictions of ``values``, all of one input (``input_of``), in order."""
        if not values:
            return []
        chosen = self.input_of(values[0])
        for index, value in enumerate(values):
            if self.input_of(value) is not chosen:
                raise ValueError(f"mixed inputs in one call: {chosen.description} and another")
            problem = unicode_problem(value)
            if problem is not None:
                raise ValueError(f"input {index}: {problem}")
        return list(chosen.predict(self.model, [chosen.read(v) for v in values], **options))

    def evaluate(self, path: str | Path) -> Report:
        return self.model.evaluate(path)

    def streamer(self) -> Any:
        """What tags tokens as they arrive (``predict --stream``); an error where it cannot."""
        if self.exported:
            raise ConfigError(f"{self.path} is an exported model, which cannot stream")
        if not self.card.streams:
            raise ConfigError(f"{self.path} holds {self.card.description}; {self.card.stream_hint}")
        return self.model.streamer()

    def info(self) -> dict[str, Any]:
        """Kind, what it predicts, its training config's summary and data (``GET /info``)."""
        config = self.model.config
        data = config.to_dict()
        info = {"kind": self.card.kind, "description": self.description, "exported": self.exported}
        info |= self.model.describe()
        info["inputs"] = [i.name for i in self.card.inputs]
        info["config"] = {key: data[key] for key in config.SUMMARY_KEYS if key in data}
        info["trained_on"] = {k: data.get("data", {}).get(k) for k in ("train", "dev")}
        return info


def open_model(path: str | Path, device: str = "cpu", threads: int | None = None) -> Opened:
    """Open a model directory (onto ``device``) or a directory ``bistack export`` wrote (on
    onnxruntime with ``threads`` threads: None, one per core), whichever ``path`` is; no
    unpickling either way."""
    card = task_of_directory(path)
    if not is_exported(path):
        return Opened(card, card.loader_class.load(path, device), Path(path), exported=False)
    if device != "cpu":
        raise ConfigError(
            f"--device {device}: an exported model runs on onnxruntime's CPU provider; "
            "predict with the PyTorch model directory to use another device"
        )
    if card.runtime_class is None:
        raise ModelFileError(f"{path}: holds {card.description}, which has no exported runtime")
    with reading_model(path, "export.json"):
        model = card.runtime_class.load(path, threads)
    return Opened(card, model, Path(path), exported=True)


def load_model(path: str | Path, device: str = "cpu") -> Any:
    """Load whichever kind of model a model directory holds (no unpickling)."""
    return task_of_directory(path).loader_class.load(path, device)
