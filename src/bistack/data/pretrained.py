"""Pretrained word vectors: GloVe and word2vec text, fastText ``.vec``, word2vec binary.

Text files hold ``word v1 ... v_dim`` per line, after an optional ``count dim`` header
(word2vec and fastText write one, GloVe does not). Binary files (word2vec's ``.bin``) hold the
``count dim`` header line, then per word its bytes, a space and ``dim`` little-endian float32s.
Words are looked up as the vocabulary normalises them (lowercased, digits as 0), the first
occurrence winning: vector files list words most frequent first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
from torch import Tensor

from bistack.data.vocab import Vocabulary
from bistack.errors import DataError


@dataclass(frozen=True)
class WordVectors:
    """Vectors by vocabulary key, in file order."""

    keys: list[str]
    vectors: Tensor  # (len(keys), dim)

    def index(self) -> dict[str, int]:
        return {key: i for i, key in enumerate(self.keys)}


def vectors_format(path: str | Path, declared: str = "auto") -> str:
    """``text`` or ``binary``: as declared, else ``.bin`` files are binary."""
    if declared != "auto":
        return declared
    return "binary" if Path(path).suffix.lower() == ".bin" else "text"


def read_word_vectors(
    path: str | Path,
    dim: int,
    key: Callable[[str], str],
    wanted: Collection[str],
    cap: int,
    file_format: str = "auto",
) -> WordVectors:
    """The vectors of the keys in ``wanted`` (the training vocabulary), and of the first
    ``cap`` other keys in the file (the most frequent words a model should know beyond its
    training data)."""
    keys: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    extra = 0
    reader = _binary if vectors_format(path, file_format) == "binary" else _text
    for word, values in reader(path, dim):
        normalised = key(word)
        if normalised in seen:
            continue
        if normalised not in wanted:
            if extra >= cap:
                continue
            extra += 1
        seen.add(normalised)
        keys.append(normalised)
        rows.append(values)
    stacked = np.stack(rows) if rows else np.zeros((0, dim), dtype=np.float32)
    return WordVectors(keys, torch.from_numpy(stacked.astype(np.float32)))


def load_vectors(path: str | Path, vocabulary: Vocabulary, dim: int) -> tuple[Tensor, Tensor]:
    """Vectors for the words of ``vocabulary`` found in ``path`` (keys as written there).

    Returns ``(vectors, found)``: ``(len(vocabulary), dim)`` float and ``(len(vocabulary),)``
    bool.
    """
    read = read_word_vectors(path, dim, lambda w: w, set(vocabulary.items[2:]), cap=0)
    vectors = torch.zeros(len(vocabulary), dim)
    found = torch.zeros(len(vocabulary), dtype=torch.bool)
    for row, word in enumerate(read.keys):
        index = vocabulary.index[word]
        vectors[index] = read.vectors[row]
        found[index] = True
    return vectors, found


def _open(path: str | Path) -> BinaryIO:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    except IsADirectoryError:
        raise DataError(path, "is a folder; expected a word vectors file") from None


def _text(path: str | Path, dim: int) -> Iterator[tuple[str, np.ndarray]]:
    with _open(path) as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise DataError(
                    path,
                    "not valid UTF-8 text; a word2vec binary file needs a .bin name or "
                    "features.pretrained_format: binary",
                    number,
                ) from None
            parts = line.rstrip().split(" ")
            if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                if int(parts[1]) != dim:
                    raise DataError(
                        path, f"the vectors have {parts[1]} values, features.word_dim is {dim}", 1
                    )
                continue
            if len(parts) != dim + 1:
                raise DataError(
                    path, f"expected a word and {dim} values, found {len(parts) - 1} values", number
                )
            try:
                values = np.array(parts[1:], dtype=np.float32)
            except ValueError:
                raise DataError(path, "a value is not a number", number) from None
            yield parts[0], values


def _binary(path: str | Path, dim: int) -> Iterator[tuple[str, np.ndarray]]:
    with _open(path) as handle:
        header = handle.readline().split()
        if len(header) != 2 or not all(h.isdigit() for h in header):
            raise DataError(path, "expected a word2vec binary header 'count dim' on line 1", 1)
        count, width = int(header[0]), int(header[1])
        if width != dim:
            raise DataError(path, f"the vectors have {width} values, features.word_dim is {dim}", 1)
        for number in range(1, count + 1):
            word = bytearray()
            while (byte := handle.read(1)) != b" ":
                if not byte:
                    raise DataError(path, f"ends inside word {number} of {count}")
                if byte != b"\n":  # some writers end each vector with a newline
                    word += byte
            data = handle.read(4 * dim)
            if len(data) != 4 * dim:
                raise DataError(path, f"ends inside the vector of word {number} of {count}")
            try:
                text = word.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(path, f"word {number} is not valid UTF-8") from None
            yield text, np.frombuffer(data, dtype="<f4").copy()
