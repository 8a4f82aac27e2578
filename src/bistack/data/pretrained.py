"""Pretrained word vectors from GloVe or word2vec text files."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from bistack.data.vocab import Vocabulary
from bistack.errors import DataError


def load_vectors(path: str | Path, vocabulary: Vocabulary, dim: int) -> tuple[Tensor, Tensor]:
    """Vectors for the words of ``vocabulary`` found in ``path``.

    Returns ``(vectors, found)``: ``(len(vocabulary), dim)`` float and ``(len(vocabulary),)``
    bool. A word2vec header line (``count dim``) is skipped; every other line is
    ``word v1 ... v_dim``, and a line with another number of values is an error.
    """
    vectors = torch.zeros(len(vocabulary), dim)
    found = torch.zeros(len(vocabulary), dtype=torch.bool)
    try:
        handle = open(path, encoding="utf-8-sig")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                parts = line.rstrip().split(" ")
                if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue
                if len(parts) != dim + 1:
                    raise DataError(
                        path,
                        f"expected a word and {dim} values, found {len(parts) - 1} values",
                        number,
                    )
                index = vocabulary.index.get(parts[0])
                if index is not None and index > 1:
                    try:
                        vectors[index] = torch.tensor([float(v) for v in parts[1:]])
                    except ValueError:
                        raise DataError(path, "a value is not a number", number) from None
                    found[index] = True
        except UnicodeDecodeError as error:
            raise DataError(path, f"not valid UTF-8 ({error.reason})") from None
    return vectors, found
