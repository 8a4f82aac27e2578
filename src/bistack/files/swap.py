"""How a command replaces a folder: the new one is written whole beside it, then the two are
exchanged in one atomic step, so a reader, or a kill at any instant, finds the old folder or the
new one at the user's path, never neither.

Everything bistack stages beside an output carries a marker file (:data:`STAGING_MARKER`,
holding the writer's pid), so a leftover of a killed command is told from a user's folder by
what it holds, not by its name, and the next successful command into that output clears it.
Where the file system has no exchange (``renameat2(RENAME_EXCHANGE)``), two renames park the
old folder as ``.NAME.bistack-parked``; a kill between them leaves the user's path missing, and the
next command puts the parked folder back (:func:`restore_parked`) rather than deleting it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bistack.files.leftovers import leftover_name, leftover_of, leftover_pattern, leftover_prefix

STAGING_MARKER = ".bistack-staging"
_NO_EXCHANGE = (22, 38, 95)  # EINVAL, ENOSYS, EOPNOTSUPP: the file system cannot exchange


def parked(target: Path) -> Path:
    """Where the two-rename fallback keeps the old ``target`` while the new one moves in."""
    return target.with_name(leftover_name(target.name, "parked"))


def exchange(source: Path, target: Path) -> None:
    """Atomically swap two directories (``renameat2(RENAME_EXCHANGE)``): a reader sees the old
    one or the new one, never neither. Without that call, two renames through
    :func:`parked` (undone by :func:`restore_parked` if a kill falls between them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        at_fdcwd, rename_exchange = -100, 2
        if renameat2(at_fdcwd, bytes(source), at_fdcwd, bytes(target), rename_exchange) == 0:
            return
        error = ctypes.get_errno()
        if error not in _NO_EXCHANGE:
            raise OSError(error, os.strerror(error), str(target))
    renames(source, target)


def renames(source: Path, target: Path) -> None:
    """The fallback of :func:`exchange`: ``target`` parked, ``source`` moved in, the parked
    folder moved to ``source``'s place."""
    hidden = parked(target)
    os.rename(target, hidden)
    os.rename(source, target)
    os.rename(hidden, source)


def restore_parked(target: Path) -> str | None:
    """Put back a folder that a command killed between the fallback's two renames parked, when
    nothing took its place; returns what was done, in words, or None. A parked folder beside a
    ``target`` that exists is named and kept: it is never deleted unasked."""
    hidden = parked(target)
    if not hidden.is_dir() or hidden.is_symlink():
        return None
    if target.exists() or target.is_symlink():
        return (
            f"{hidden} holds an earlier {target.name} that an interrupted command set aside; it "
            "is kept: delete it once you have no use for it"
        )
    os.rename(hidden, target)
    (target / STAGING_MARKER).unlink(missing_ok=True)
    return f"restored {target} from {hidden}, where an interrupted command had set it aside"


def mark(folder: Path) -> None:
    """Say in ``folder`` that it is this process's staging (or a replaced output it will
    delete), so that a kill leaves something the next command recognises."""
    (folder / STAGING_MARKER).write_text(str(os.getpid()), encoding="utf-8")


def is_leftover(folder: Path) -> bool:
    """Whether ``folder`` is a staging folder (or a replaced output) of a command that no longer
    runs: it holds the marker, naming a process that is gone or this one (or it is an empty
    staging folder, which a kill left before its marker was written)."""
    marker = folder / STAGING_MARKER
    if folder.is_symlink() or not folder.is_dir():
        return False
    if not marker.is_file():
        return leftover_of(folder.name, "staging") is not None and not any(folder.iterdir())
    try:
        pid = int(marker.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return True  # half-written by a killed command
    return pid == os.getpid() or not alive(pid)


def clear_leftovers(target: Path) -> None:
    """Delete what killed commands left beside ``target`` (``.NAME.bistack-*`` folders holding
    the marker of a process that is gone); a folder without the marker is never touched."""
    for sibling in target.parent.glob(leftover_pattern(target.name)):
        if is_leftover(sibling):
            remove_marked(sibling)


def remove_marked(folder: Path) -> None:
    """Delete a marked folder, its marker last: a kill midway leaves it marked, so the next
    command still recognises (and clears) what is left."""
    for entry in folder.iterdir():
        if entry.name == STAGING_MARKER:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    (folder / STAGING_MARKER).unlink(missing_ok=True)
    folder.rmdir()


@contextmanager
def atomic_folder(target: Path) -> Iterator[Path]:
    """A staging folder beside ``target`` to fill inside the block; exchanged with ``target``
    when the block ends (an earlier ``target`` replaced only then), removed when it fails, so
    a reader never sees half a folder nor none."""
    target.parent.mkdir(parents=True, exist_ok=True)
    restore_parked(target)
    staging = Path(
        tempfile.mkdtemp(dir=target.parent, prefix=leftover_prefix(target.name, "staging"))
    )
    os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700; give the usual mode
    try:
        mark(staging)
        yield staging
        if target.is_dir() and not target.is_symlink():
            mark(target)  # the old folder, once swapped out, is a leftover if a kill comes
            exchange(staging, target)
            remove_marked(staging)
        else:
            os.rename(staging, target)
        (target / STAGING_MARKER).unlink(missing_ok=True)
        clear_leftovers(target)
    except BaseException:
        if staging.exists() and is_leftover(staging):
            remove_marked(staging)
        (target / STAGING_MARKER).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def alive(pid: object) -> bool:
    """Whether ``pid`` names a process that runs (one of another user's counts as running)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
