"""A plain-text corpus for language modelling: lines -> token sequences of bounded length."""

from __future__ import annotations

from pathlib import Path

from bistack.data.tokenize import tokenize_text
from bistack.errors import DataError


def read_corpus(path: str | Path, tokenizer: str, max_length: int) -> list[list[str]]:
    """Token sequences of the file's non-blank lines; a line longer than ``max_length`` tokens
    becomes several consecutive sequences (nothing is dropped)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    except UnicodeDecodeError as error:
        raise DataError(path, f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    sequences = []
    for line in text.split("\n"):  # lines end at "\n" alone, as the user wrote them
        tokens = [t.text for t in tokenize_text(line, tokenizer)]
        for start in range(0, len(tokens), max_length):
            sequences.append(tokens[start : start + max_length])
    if not sequences:
        raise DataError(path, "no text: every line is blank")
    return sequences
