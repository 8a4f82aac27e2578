"""Whether a command may replace an output folder: only when everything in it, at every depth,
is what bistack writes there. Every command that replaces a folder asks :func:`claim_folder`
(or, where the top level is the user's to share, :func:`refuse_foreign`) before it writes.

A command's *layout* says, for an entry's name, whether bistack writes it (True), does not
(False), writes a folder there whose entries the returned layout judges, or leaves it where it
is, untouched (None: a user's file beside a run's model). The walk never follows a symbolic
link: a link at any depth where bistack writes is something bistack did not write, and is
refused rather than replaced or read through.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from bistack.errors import ConfigError
from bistack.files.leftovers import leftover_of
from bistack.files.paths import refuse_shared_folder
from bistack.files.swap import STAGING_MARKER, restore_parked

# For an entry's name: True (bistack's, whole), False (not bistack's), its folder's layout, or
# None (not bistack's, and left untouched).
Layout = Callable[[str], "Layout | bool | None"]


def staged(name: str, written: tuple[str, ...] | None = None) -> bool:
    """Whether ``name`` is what bistack leaves beside an entry while writing it (a temporary
    file, a staging folder, a lock: ``.ENTRY.bistack-…``, see ``bistack.files.leftovers``),
    of ``written`` (any name, when None)."""
    entry = leftover_of(name)
    return entry is not None and (written is None or entry in written)


def files_only(*names: str) -> Layout:
    """A folder of the flat files ``names`` (and what writing them leaves beside them)."""
    return lambda name: name in names or staged(name)


def foreign_files(folder: Path, layout: Layout) -> list[Path]:
    """Every entry under ``folder`` that ``layout`` does not say bistack writes, in order; a
    symbolic link counts at any depth, and is never followed."""
    found: list[Path] = []
    if folder.is_symlink() or not folder.is_dir():
        return found
    for entry in sorted(folder.iterdir()):
        verdict = layout(entry.name)
        if verdict is None or entry.name == STAGING_MARKER:
            continue
        if entry.is_symlink():
            found.append(entry)
            continue
        if verdict is True:
            continue
        if verdict is not False and entry.is_dir():
            found += foreign_files(entry, verdict)
        else:
            found.append(entry)  # not bistack's, or a file where bistack writes a folder
    return found


def refuse_foreign(folder: Path, layout: Layout, what: str, consequence: str) -> None:
    """A ConfigError naming what, under ``folder``, bistack did not write (``consequence``:
    why that matters here), before anything is changed."""
    found = foreign_files(folder, layout)
    if found:
        shown = ", ".join(str(path.relative_to(folder)) for path in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise ConfigError(
            f"{what} {folder} holds files bistack did not write there ({shown}{more}); "
            f"{consequence}: move them out, or choose another {what.split()[-1]}; nothing was "
            "changed (--overwrite never allows this)"
        )


def output_folder(output: str | Path, what: str) -> Path:
    """The folder a command writes for ``output``: the folder itself, or, when ``output`` is a
    symbolic link to a folder, the link's target (the link is kept, and the new folder is
    staged beside the target, on its file system)."""
    path = Path(output)
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    if not target.exists():
        raise ConfigError(
            f"{what} {output} is a symbolic link to {target}, which does not exist; give a "
            "folder, or a link to one"
        )
    if not target.is_dir():
        raise ConfigError(f"{what} {output} is a symbolic link to the file {target}; give a folder")
    return target


def claim_folder(
    output: str | Path,
    what: str,
    *,
    overwrite: bool,
    signature: str,
    layout: Layout,
) -> bool:
    """Check, before anything is written, that the folder ``output`` (a real folder: see
    :func:`output_folder`) may take a command's files; returns whether it holds an earlier
    such output to replace.

    A new or empty folder is taken. A folder holding this command's earlier output (its
    ``signature`` file at the top, and nothing at any depth but what ``layout`` accepts) is
    replaced only with ``overwrite``. Anything else is refused even with it: what the command
    did not write is never deleted."""
    folder = Path(output)
    refuse_shared_folder(folder, what)
    restore_parked(folder)
    if not folder.exists():
        return False
    if not folder.is_dir():
        raise ConfigError(f"{what} {folder} is a file; give a folder")
    entries = sorted(e.name for e in folder.iterdir() if e.name != STAGING_MARKER)
    if not entries:
        return False
    consequence = "the new output replaces the folder whole, and they are never deleted"
    if signature not in entries:
        refuse_foreign(folder, lambda name: False, what, consequence)
    refuse_foreign(folder, layout, what, consequence)
    if not overwrite:
        raise ConfigError(
            f"{what} {folder} holds what an earlier such command wrote there; give --overwrite to "
            "replace it, or choose another folder"
        )
    return True
