"""What a file or folder holds, as a short digest of its content: how a resumed run checks
that it goes on with the same model and data it started with (an edit in place, or a file cut
short, at the same path is a different input). blake2b reads about a gigabyte a second, so a
run's inputs are hashed in a moment beside the work they feed."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def content_digest(path: str | Path) -> str:
    """A digest of ``path``'s bytes, or for a folder of every file in it (names and bytes, in
    sorted order); ``missing`` when there is nothing at ``path``."""
    path = Path(path)
    if not path.exists():
        return "missing"
    digest = hashlib.blake2b(digest_size=16)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else "").encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def digests(named: Iterable[tuple[str, str | Path]]) -> dict[str, str]:
    """``{name: content_digest(path)}`` for named paths."""
    return {name: content_digest(path) for name, path in named}


def changed(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """The names whose content differs between two ``digests`` (a name only one of them has
    is not compared: a record made before it was kept)."""
    return sorted(name for name in recorded.keys() & now.keys() if recorded[name] != now[name])
