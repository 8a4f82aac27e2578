"""A kind's config keys as its schema declares them: every key, its default and the comment the
config class writes beside it, read from the classes themselves (``bistack config KIND``
prints them as a YAML file to start from). Nothing here is written twice: the defaults are
the dataclasses', the comments their source's."""

from __future__ import annotations

import dataclasses
import inspect
import io
import textwrap
import tokenize
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml


@dataclass(frozen=True)
class Key:
    """One key of a config: ``section.name``, its default (None when it has none), the
    values it may take when they are a fixed few, and its comment (empty when it has none)."""

    key: str
    default: Any
    choices: tuple[Any, ...]
    comment: str
    section: bool  # a section (its keys follow), not a value


@cache
def field_comments(cls: type) -> dict[str, str]:
    """The comment of each field of ``cls`` as written in its class body: the ``# ...`` on its
    line, else the comment lines right above it."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments_at: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments_at[token.start[0]] = token.string.lstrip("#").strip()
    lines = source.splitlines()
    found = {}
    for number, line in enumerate(lines, start=1):
        name = line.strip().split(":", 1)[0]
        if not line.startswith("    ") or line.startswith("     ") or not name.isidentifier():
            continue
        above: list[str] = []
        cursor = number - 1
        while cursor in comments_at and lines[cursor - 1].strip().startswith("#"):
            above.insert(0, comments_at[cursor])
            cursor -= 1
        said = comments_at.get(number) if not line.strip().startswith("#") else None
        text = " ".join([*above, *([said] if said else [])])
        if text:
            found[name] = text
    return found


def comment_of(cls: type, name: str) -> str:
    """``name``'s comment in the class that declares it (a base class, for an inherited
    field)."""
    for owner in cls.__mro__:
        if name in getattr(owner, "__annotations__", {}):
            said = field_comments(owner).get(name)
            if said:
                return said
    return ""


def keys_of(config: Any, prefix: str = "") -> Iterator[Key]:
    """Every key of the config object ``config`` (a kind's config class built with its
    defaults: ``TaggerConfig()``) with its value, in reading order; a section (a nested config)
    is followed by its own keys."""
    cls = type(config)
    hints = typing.get_type_hints(cls)
    for field in in_reading_order(cls) if not prefix else config_fields(cls):
        value = getattr(config, field.name)
        key = f"{prefix}{field.name}"
        section = section_class(hints[field.name])
        comment = comment_of(cls, field.name)
        if section is not None:
            doc = inspect.getdoc(section) or ""
            if doc.startswith(f"{section.__name__}("):  # the dataclass's own, not a docstring
                doc = ""
            said = comment or doc.split("\n\n")[0].replace("\n", " ")
            yield Key(key, None if value is None else "", (), said, True)
            if value is not None:
                yield from keys_of(value, f"{key}.")
            continue
        yield Key(key, value, choices_of(hints[field.name]), comment, False)


def config_fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init and not f.name.isupper()]


def in_reading_order(cls: type) -> list[dataclasses.Field]:
    """A top-level config's fields: ``kind`` first, then the kind's own sections, then those
    every config shares (optimizer, train), as a config file reads best."""
    fields = config_fields(cls)
    root = [base for base in cls.__mro__ if dataclasses.is_dataclass(base)][-1]
    shared = {f.name for f in dataclasses.fields(root)} - {"kind"}
    return [f for f in fields if f.name not in shared] + [f for f in fields if f.name in shared]


def section_class(hint: Any) -> type | None:
    """The config class a field holds (``FeaturesConfig`` of ``FeaturesConfig | None``)."""
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def choices_of(hint: Any) -> tuple[Any, ...]:
    """The values a ``Literal`` field takes (``Literal`` inside ``| None`` too)."""
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)
    found: tuple[Any, ...] = ()
    for part in typing.get_args(hint):
        found += choices_of(part)
    return found


def as_yaml(keys: list[Key], title: str) -> str:
    """The keys as a YAML config to start from: each key with its default, its comment (and
    its choices) on the lines above it, sections indented."""
    lines = [f"# {line}" for line in title.splitlines()]
    for key in keys:
        depth = key.key.count(".")
        indent = "  " * depth
        name = key.key.rsplit(".", 1)[-1]
        notes = key.comment
        if key.choices and len(key.choices) > 1:
            notes = f"{notes} (one of: {', '.join(map(str, key.choices))})".strip()
        if notes:
            lines.append("")
            lines += [f"{indent}# {line}" for line in wrapped(notes, 96 - len(indent))]
        if key.section:
            lines.append(f"{indent}{name}:" + ("" if key.default is not None else " null"))
            continue
        value = yaml.safe_dump(key.default, default_flow_style=True).strip()
        value = value.removesuffix("\n...").removesuffix("...").strip()
        lines.append(f"{indent}{name}: {value}")
    return "\n".join(lines) + "\n"


def wrapped(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width) or [""]
