"""The task table: every model kind's card (``bistack.cards``), and configs read by kind.

``TASKS`` maps the kind written to config.json (or export.json) to its card. The command line,
the server, corpus prediction, the Ray step, the studies and ``bistack.training`` look kinds up
here, and open models through ``bistack.predictor.open_model``, the one door into a model
directory or an exported directory; nothing else branches on a model's kind. The table imports
no torch: behaviour is reached through the cards only when used. A new kind is one
:func:`register` call of a card naming its own modules (and the formats its predictions are
written in: a format two kinds declare must be declared alike).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from bistack.cards import Card, OutputFormat, PredictOption
from bistack.config import ExperimentConfig
from bistack.config.files import (
    apply_override,
    build_config,
    get_key,
    kind_named,
    read_yaml,
    resolved_paths,
    set_key,
)
from bistack.config.recipes import config_file, is_named, is_recipe, unfound
from bistack.data.tokenize import anchored
from bistack.errors import ConfigError
from bistack.language_models import cards as language_models
from bistack.taggers import cards as taggers
from bistack.text_models import cards as text_models


class Report(Protocol):
    """An evaluation: readable as ``str()``, and as plain data for ``evaluate --json``."""

    def to_json(self) -> dict[str, Any]: ...


class Model(Protocol):
    """What a card's loader gives: a trained model that opens from its directory (its class's
    ``from_saved``, given the directory as ``bistack.predictor.open_model`` read it; ``load``
    opens one by path), predicts (as its card's inputs say), scores labelled data and says
    what it is. ``bistack.models.saved.SavedKind`` gives ``load``."""

    KIND: ClassVar[str]  # the kind its config.json names
    CONFIG: ClassVar[type]  # its config class
    config: Any

    @classmethod
    def load(cls, path: str | Path, device: Any = "cpu") -> Self: ...

    @classmethod
    def from_saved(cls, saved: Any) -> Self: ...

    def evaluate(self, path: str | Path) -> Report: ...
    def describe(self) -> dict[str, Any]: ...


TASKS: dict[str, Card] = {}


def register(card: Card) -> Card:
    """Add a kind to the table (a kind registered twice is an error, and so is an option or an
    output format another kind declares otherwise under the same name: the faces offer one of
    each)."""
    if card.kind in TASKS:
        raise ValueError(f"model kind {card.kind!r} is already registered")
    offered: list[tuple[str, Sequence[PredictOption | OutputFormat], Mapping[str, object]]] = [
        ("option", card.predict_options, offered_options()),
        ("format", card.formats, offered_formats()),
    ]
    for what, declared, known in offered:
        for item in declared:
            if known.get(item.name, item) != item:
                raise ValueError(
                    f"model kind {card.kind!r}: {what} {item.name!r} is declared otherwise by "
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


def offered_formats() -> dict[str, OutputFormat]:
    """Every ``predict --format`` of the registered kinds, by name, each once, in registration
    order."""
    formats: dict[str, OutputFormat] = {}
    for card in TASKS.values():
        for fmt in card.formats:
            formats.setdefault(fmt.name, fmt)
    return formats


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
    only from the working directory, as earlier versions read it (stderr when None). ``path``
    may name a packaged recipe (``recipe:NAME``)."""
    path = config_file(path)
    data = read_yaml(path)
    config_class = task_of(kind_named(data, str(path)), str(path)).config_class
    keys, hubs = config_class.INPUT_KEYS, config_class.HUB_KEYS
    folder, anywhere = Path(path).parent, not is_recipe(path)  # a recipe: never the cwd's
    for warning in resolved_paths(data, keys, folder, str(path), hubs, anywhere):
        (say or (lambda text: print(text, file=sys.stderr)))(f"warning: {warning}")
    tokenizer = get_key(data, "data.tokenizer")
    if isinstance(tokenizer, str):  # an hf:FOLDER beside the config, as its data is
        set_key(data, "data.tokenizer", anchored(tokenizer, Path(path).parent), str(path))
    return data


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML config (:func:`read_config_file`) and apply ``key.sub=value`` overrides
    (values parsed as YAML; a path given so is read from the working directory, as the shell
    reads it)."""
    data = read_config_file(path)
    for override in overrides or []:
        apply_override(data, override)
    refuse_missing_data(data, path)
    return config_from_dict(data, source=str(path))


def refuse_missing_data(data: dict[str, Any], path: str | Path) -> None:
    """Once overrides are applied: a file named by the data root or a package that is not
    there, and, in a packaged recipe, any data file that is not there (it names the
    benchmark's, the user's to give), are errors naming the key and the ``--set`` to give.
    ``path``: the config file ``data`` was read from."""
    file, source = config_file(path), str(path)
    recipe = is_recipe(file)
    config_class = task_of(kind_named(data, source), source).config_class
    for key in config_class.INPUT_KEYS:
        value = get_key(data, key)
        if not isinstance(value, str):
            continue
        if is_named(value):
            raise ConfigError(f"{source}: {unfound(key, value, file.parent)}")
        if recipe and key.startswith("data.") and not Path(value).exists():
            raise ConfigError(
                f"{source}: {key} {value}: no such file; the recipe names the benchmark's file: "
                f"give yours with --set {key}=PATH"
            )
