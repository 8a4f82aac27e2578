"""Outputs that are inputs: a command that writes must never write onto, into or around what it
reads. Paths are compared as the file system resolves them (relative or absolute, ``./``,
``..``, through symbolic links), so no spelling gets past; ``--overwrite`` never overrides it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from bistack.errors import ConfigError


def resolved(path: str | Path) -> Path:
    """``path`` as the file system resolves it (symbolic links followed; it need not exist)."""
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def overlaps(output: Path, given: Path) -> str | None:
    """How ``output`` would harm ``given`` (both resolved): "is", "contains", "lies inside"."""
    if output == given:
        return "is"
    if output in given.parents:
        return "contains"
    if given in output.parents:
        return "lies inside"
    return None


def refuse_overlap(
    output: str | Path, inputs: Iterable[tuple[str, str | Path | None]], what: str = "the output"
) -> None:
    """A ConfigError naming both paths when ``output`` is, contains or lies inside one of the
    named ``inputs`` (``(name, path)``; None and stdin ``-`` are skipped), before anything is
    written."""
    target = resolved(output)
    for name, path in inputs:
        if path is None or str(path) in ("", "-") or str(path).startswith("memory:"):
            continue
        relation = overlaps(target, resolved(path))
        if relation is not None:
            raise ConfigError(
                f"{what} {output} {relation} {name} {path}: writing it would destroy what is "
                "read; choose another output (--overwrite never allows this)"
            )


def refuse_shared_folder(output: str | Path, what: str = "the output") -> None:
    """A ConfigError when the folder ``output`` is the filesystem root, the home folder, or the
    working directory or a folder holding it: a command replaces or fills its output folder,
    and none of these is ever a command's own to fill (``--overwrite`` never allows it)."""
    target = resolved(output)
    if target == Path(target.anchor):
        reason = "is the filesystem root"
    elif target == resolved(Path.home()):
        reason = "is the home folder"
    else:
        relation = overlaps(target, resolved(os.getcwd()))
        reason = f"{relation} the working directory" if relation in ("is", "contains") else ""
    if reason:
        raise ConfigError(
            f"{what} {output} {reason}; give a folder of its own (--overwrite never allows this)"
        )
