"""Reading configs: YAML files, ``key.sub=value`` overrides, dicts built into config classes
(unknown keys and wrong types are errors that name the key, so a typo never silently falls back
to a default), and the layouts of earlier versions, rewritten once on the way in.

Before kinds were explicit a config named a ``task`` (tagging, classification...), and a
``backbone`` section made it a model over a transformer's layers; :func:`kind_named` reads that
layout. Keys a kind kept elsewhere are its config class's to move (``ExperimentConfig.upgrade``).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import types
import typing
from collections.abc import Hashable
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from bistack.config import ExperimentConfig
from bistack.config.hub import HUB_ID
from bistack.config.recipes import config_file, is_named, named_file, recipe_hint
from bistack.errors import ConfigError

C = TypeVar("C", bound=ExperimentConfig)

# (task, has a backbone section) -> kind, for configs written before kinds were explicit.
_LEGACY_KINDS = {
    ("tagging", False): "tagger",
    ("tagging", True): "layer_tagger",
    ("classification", False): "classifier",
    ("classification", True): "layer_classifier",
    ("regression", False): "regressor",
    ("regression", True): "layer_regressor",
    ("language_model", False): "language_model",
}


class DuplicateKey(yaml.YAMLError):
    """A mapping that gives one key twice: YAML would keep the last silently."""


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (with its line)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, Hashable) and key in seen:
                raise DuplicateKey(
                    f"line {line}: {key!r} is given twice (first on line {seen[key]}); "
                    "give each key once"
                )
            if isinstance(key, Hashable):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """A YAML config file as a mapping, with ``key.sub=value`` overrides applied (values parsed
    as YAML); earlier versions' layouts are read when it is built (:func:`build_config`).
    ``path`` may name a packaged recipe (``recipe:NAME``)."""
    path = config_file(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file{recipe_hint(path)}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder; expected a YAML config file") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
            f"{error.start}); expected a YAML config file"
        ) from None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader) or {}
    except DuplicateKey as error:
        raise ConfigError(f"{path}: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    for override in overrides or []:
        apply_override(data, override)
    return data


def apply_override(data: dict[str, Any], override: str) -> None:
    """Set ``a.b=value`` in nested ``data``, the value parsed as YAML (``--set``)."""
    key, value = parse_override(override, "--set")
    set_key(data, key, value, f"--set {override!r}")


def parse_override(override: str, flag: str) -> tuple[str, Any]:
    """``key=value`` as ``flag`` takes it: the dotted key and the value parsed as YAML."""
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"{flag} {override!r}: expected key=value, e.g. train.max_epochs=30")
    try:
        return key, yaml.safe_load(raw)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise ConfigError(f"{flag} {override!r}: the value is not valid YAML ({problem})") from None


def get_key(data: dict[str, Any], key: str) -> Any:
    """The value at the dotted ``key`` of nested ``data``, or None where it is not given."""
    node: Any = data
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def resolved_paths(
    data: dict[str, Any],
    keys: tuple[str, ...],
    folder: Path,
    source: str,
    hub_keys: tuple[str, ...] = (),
    from_working_directory: bool = True,
) -> list[str]:
    """Make the relative paths at ``keys`` of a config file's ``data`` relative to ``folder``
    (the file's own), in place, as absolute paths, so that a config names its data as seen
    from where it lies, whatever the working directory. A path found only from the working
    directory (as configs of earlier versions were read) is kept so, unless
    ``from_working_directory`` is false (a packaged recipe: never); the warnings returned say
    which. A file named by the data root or a package (``$BISTACK_DATA/...``,
    ``package:NAME/...``, :mod:`bistack.config.recipes`) becomes its path where it can be
    found, and stays as written otherwise (refused, naming what to give, once overrides are
    applied). ``default`` (the packaged backbone) and ``memory:`` tables are not paths, nor is
    a hub id (``org/name``) at one of ``hub_keys`` that names nothing on this disk."""
    warnings = []
    for key in keys:
        value = get_key(data, key)
        if not isinstance(value, str) or not value or value == "default":
            continue
        if is_named(value):
            found = named_file(value, folder)
            if found is not None and found.exists():
                set_key(data, key, str(found), source)
            continue
        if value.startswith("memory:") or Path(value).expanduser().is_absolute():
            continue
        beside = (folder / value).resolve()
        here = Path(value).resolve() if from_working_directory else beside
        if key in hub_keys and not beside.exists() and not here.exists() and HUB_ID.match(value):
            continue  # a HuggingFace hub id (bistack.config.hub), not a path
        if not beside.exists() and here.exists():
            warnings.append(
                f"{source}: {key} {value} is read from the working directory ({here}); "
                f"paths in a config are relative to its folder ({folder.resolve()}): write "
                f"{os.path.relpath(here, folder.resolve())}"
            )
            set_key(data, key, str(here), source)
        else:
            set_key(data, key, str(beside), source)
    return warnings


def set_key(data: dict[str, Any], key: str, value: Any, source: str) -> None:
    """Set the dotted ``key`` (``train.max_epochs``) in nested ``data``, making sections that
    are missing; a key inside a value that is not a section is an error naming ``source``."""
    *parents, leaf = key.split(".")
    node = data
    for parent in parents:
        node = node.setdefault(parent, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: {parent!r} is not a section")
    node[leaf] = value


def kind_named(data: dict[str, Any], source: str = "config") -> str:
    """The model kind ``data`` names: its ``kind``, or the kind an earlier version's ``task``
    (with or without a ``backbone`` section) meant; a config with neither is a tagger's, as it
    always was."""
    if "task" not in data:
        kind = data.get("kind", "tagger")
        if not isinstance(kind, str):
            raise ConfigError(f"{source}: kind must be a string, got {kind!r}")
        return kind
    if "kind" in data:
        raise ConfigError(f"{source}: give kind or the older task, not both")
    key = (data["task"], "backbone" in data)
    if key not in _LEGACY_KINDS:
        tasks = sorted({t for t, _ in _LEGACY_KINDS})
        raise ConfigError(f"{source}: task must be one of {', '.join(tasks)}, got {data['task']!r}")
    return _LEGACY_KINDS[key]


def build_config(cls: type[C], data: dict[str, Any], source: str = "config") -> C:
    """A validated ``cls`` from ``data``, written in today's layout or an earlier version's
    (rewritten on a copy, by :func:`kind_named` and ``cls.upgrade``); errors name the key."""
    data = copy.deepcopy(data)
    legacy = "task" in data
    data["kind"] = kind_named(data, source)
    data.pop("task", None)
    cls.upgrade(data, legacy, source)
    config = _build(cls, data, source, "")
    config.validate(source)
    return config


# Defaults that changed since models recorded their configs: a recorded config without the key
# was written when leaving it out meant this value (``backbone.precision`` was 32 before
# ``auto``, which settles by the machine reading it: a saved model reads as it trained).
RECORDED_DEFAULTS = {("backbone", "precision"): "32"}


def recorded_config(cls: type[C], data: dict[str, Any], source: str) -> C:
    """:func:`build_config` of a config a model or a run recorded (config.json, export.json):
    a key whose default changed since is read as the default it had then
    (``RECORDED_DEFAULTS``), not as today's."""
    data = copy.deepcopy(data)
    for (section, key), value in RECORDED_DEFAULTS.items():
        part = data.get(section)
        if isinstance(part, dict):
            part.setdefault(key, value)
    return build_config(cls, data, source)


def same_settings(recorded: dict[str, Any], config: ExperimentConfig) -> bool:
    """Whether a config recorded by an earlier run equals ``config``, keys added since then
    counting as their defaults (so a finished run stays reusable across versions)."""
    try:
        return recorded_config(type(config), recorded, "recorded run").to_dict() == config.to_dict()
    except ConfigError:
        return False


def key_hint(cls: type, key: str, source: str) -> Any:
    """The type a dotted ``key`` (``encoder.outer_dropout``) holds in config class ``cls``, its
    optional sections looked through; an unknown key is an error naming it and ``source``."""
    parts = key.split(".")
    node: Any = cls
    for depth, name in enumerate(parts[:-1]):
        node = _section_class(_field_hint(node, name, key, ".".join(parts[:depth]), source))
        if node is None:
            raise ConfigError(f"{source}: {key!r}: {'.'.join(parts[: depth + 1])} is not a section")
    return _field_hint(node, parts[-1], key, ".".join(parts[:-1]), source)


def _field_hint(section: type, name: str, key: str, where: str, source: str) -> Any:
    hints = typing.get_type_hints(section)
    if name not in {f.name for f in dataclasses.fields(section)}:
        known = ", ".join(sorted(f.name for f in dataclasses.fields(section)))
        raise ConfigError(
            f"{source}: unknown key {key!r} (known{' in ' + where if where else ''}: {known})"
        )
    return hints[name]


def _build(cls: type, data: Any, source: str, prefix: str, base: Any = None) -> Any:
    """``cls`` from ``data``; keys it leaves out keep ``base``'s values (a section's defaults
    for the config's kind: a layer classifier's ``optimizer: {lr: ...}`` stays AdamW), or the
    class defaults where there is no base."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: {prefix.rstrip('.') or 'config'} must be a mapping")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key {prefix + unknown[0]!r} (known: {', '.join(sorted(fields))})"
        )
    values: dict[str, Any] = {}
    for name, value in data.items():
        hint = hints[name]
        section = _section_class(hint)
        if section is not None and value is None and hint is not section:
            values[name] = None  # an optional section left out
        elif section is not None:
            inner = getattr(base, name) if base is not None else _default(fields[name])
            values[name] = _build(section, value, source, f"{prefix}{name}.", inner)
        else:
            values[name] = _check_value(hint, value, source, f"{prefix}{name}")
    return dataclasses.replace(base, **values) if base is not None else cls(**values)


def _section_class(hint: Any) -> type | None:
    """The dataclass a field holds (``Section`` or an optional ``Section | None``), if any."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        (section, *rest) = [a for a in typing.get_args(hint) if a is not type(None)]
        if not rest and isinstance(section, type) and dataclasses.is_dataclass(section):
            return section
    return None


def _default(field_: dataclasses.Field) -> Any:
    """A field's default value (its factory called), or None when it has none."""
    if field_.default_factory is not dataclasses.MISSING:
        return field_.default_factory()
    return None if field_.default is dataclasses.MISSING else field_.default


def _check_value(hint: Any, value: Any, source: str, key: str) -> Any:
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list) or not all(
            isinstance(v, item) and not isinstance(v, bool) for v in value
        ):
            raise ConfigError(f"{source}: {key} must be a list of {item.__name__}s, got {value!r}")
        return value
    if origin is Literal:
        spelled = str(value) if isinstance(value, int) and not isinstance(value, bool) else None
        if spelled in typing.get_args(hint):  # YAML reads 32 as a number; the choice is "32"
            return spelled
        if value not in typing.get_args(hint):
            choices = ", ".join(repr(c) for c in typing.get_args(hint))
            raise ConfigError(f"{source}: {key} must be one of {choices}, got {value!r}")
        return value
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        real = [o for o in options if o is not type(None)]
        for option in real[:-1]:
            try:
                return _check_value(option, value, source, key)
            except ConfigError:
                continue
        return _check_value(real[-1], value, source, key)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):
        # YAML 1.1 reads 5e-5 (no dot) as a string; users mean the number.
        try:
            return float(value)
        except ValueError:
            pass
    if hint in (int, float, str, bool) and not (
        isinstance(value, hint) and not (hint is int and isinstance(value, bool))
    ):
        raise ConfigError(f"{source}: {key} must be {hint.__name__}, got {value!r}")
    return value
