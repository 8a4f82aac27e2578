"""The names of what bistack leaves beside an entry while writing it: a temporary file, a
staging folder, a lock, a parked folder. Each is ``.ENTRY.bistack-WHAT`` (with ``-UNIQUE``,
a process id or random letters, where two writers could meet), a name no user writes, so a
leftover is recognised by its name alone and a user's hidden file (``.notes.md``,
``.env.local``, a folder ``.backup.d``) is never taken for one.
"""

from __future__ import annotations

import re

_LEFTOVER = re.compile(r"\.(?P<entry>.+)\.bistack-(?P<what>[a-z]+)(?:-[A-Za-z0-9_]+)?")


def leftover_name(entry: str, what: str, unique: object = None) -> str:
    """The name of the ``what`` (``tmp``, ``staging``, ``lock``...) that writing ``entry``
    leaves beside it: ``.ENTRY.bistack-WHAT`` or ``.ENTRY.bistack-WHAT-UNIQUE``."""
    name = f".{entry}.bistack-{what}"
    return name if unique is None else f"{name}-{unique}"


def leftover_prefix(entry: str, what: str) -> str:
    """The prefix to give ``tempfile``'s ``mkstemp``/``mkdtemp`` (no suffix): its random
    letters then stand as the unique part of :func:`leftover_name`."""
    return leftover_name(entry, what) + "-"


def leftover_pattern(entry: str, what: str = "") -> str:
    """A glob for the ``what`` leftovers of ``entry`` (every kind by default)."""
    return f".{entry}.bistack-{what}*"


def leftover_of(name: str, what: str | None = None) -> str | None:
    """The entry ``name`` was left beside, when it is a leftover (of the kind ``what``, when
    given); None for any other name."""
    match = _LEFTOVER.fullmatch(name)
    if match is None or (what is not None and match["what"] != what):
        return None
    return match["entry"]
