"""Errors a user can act on: each names the file (and line or row) and what was expected."""

from __future__ import annotations

from pathlib import Path


class BistackError(Exception):
    """Base of errors the CLI reports as one line, without a traceback."""


class DataError(BistackError, ValueError):
    """Bad input data: ``path:line: message`` (text files) or ``path: row N: message`` (tables)."""

    def __init__(
        self, path: str | Path, message: str, line: int | None = None, row: int | None = None
    ) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        if row is not None:
            where += f": row {row}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line
        self.row = row


class ConfigError(BistackError, ValueError):
    """A bad configuration value or file."""


class ModelFileError(BistackError, ValueError):
    """A model directory that is missing, incomplete or of another kind."""


def needs_extra(what: str, extra: str, error: ImportError) -> str:
    """The one message for a feature whose optional dependencies are not installed: what needs
    them, the module that is missing, and the command that installs them."""
    missing = error.name or "a module"
    return f"{what} needs the {extra} extra ({missing} is missing): pip install 'bistack[{extra}]'"
