"""Outputs that are inputs: a command that writes must never write onto, into or around what it
reads. Paths are compared as the file system resolves them (relative or absolute, ``./``,
``..``, through symbolic links), so no spelling gets past; ``--overwrite`` never overrides it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
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


def claim_folder(
    output: str | Path,
    what: str,
    *,
    overwrite: bool,
    signature: str,
    ours: Callable[[str], bool],
) -> bool:
    """Check, before anything is written, that the folder ``output`` may take a command's
    files; returns whether it holds an earlier such output to replace.

    A new or empty folder is taken. A folder holding this command's earlier output (its
    ``signature`` file, and no entry but those ``ours(name)`` accepts) is replaced only with
    ``overwrite``. Anything else is refused even with it: what the command did not write is
    never deleted."""
    folder = Path(output)
    refuse_shared_folder(folder, what)
    if not folder.exists():
        return False
    if not folder.is_dir():
        raise ConfigError(f"{what} {folder} is a file; give a folder")
    entries = sorted(entry.name for entry in folder.iterdir())
    if not entries:
        return False
    foreign = [name for name in entries if not ours(name)]
    if foreign or signature not in entries:
        shown = ", ".join((foreign or entries)[:3]) + (
            ", ..." if len(foreign or entries) > 3 else ""
        )
        raise ConfigError(
            f"{what} {folder} holds files bistack did not write there ({shown}); they are "
            "never deleted: choose a new or empty folder (--overwrite never allows this)"
        )
    if not overwrite:
        raise ConfigError(
            f"{what} {folder} holds what an earlier such command wrote there; give --overwrite to "
            "replace it, or choose another folder"
        )
    return True
