"""On-disk cache of a frozen backbone's per-layer vectors, so they are computed once.

With the backbone frozen, its per-layer CLS and mean vectors never change: pooler training
reads them from here on every epoch and for every pooler compared. An entry is keyed by the
model (a hash of its folder's config and weight files), the texts, and the settings that change
the vectors (maximum length, long-text handling, stride), so changing any of them computes a
new entry and nothing stale is ever read. Entries are safetensors files written atomically.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from bistack.files.modeldir import atomic_write
from bistack.models.backbone import LayerVectors

_MODEL_FILES = ("config.json", "tokenizer.json", "vocab.txt")
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


def model_fingerprint(folder: Path) -> str:
    """A hash of the files that decide a model's outputs: config, tokenizer, weights. Hashed
    once per process while the files stay as they are (same names, sizes and modification
    times): a study of 50 runs over one backbone read its 90 MB of weights 150 times."""
    files = sorted(
        path
        for path in folder.iterdir()
        if path.name in _MODEL_FILES or path.suffix in _WEIGHT_SUFFIXES
    )
    stamps = tuple((str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _hash_files(stamps)


@functools.lru_cache(maxsize=32)
def _hash_files(stamps: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _, _ in stamps:
        digest.update(Path(name).name.encode())
        with open(name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def cache_key(fingerprint: str, texts: Sequence[str], settings: dict[str, Any]) -> str:
    """One key per (model, texts in order, settings)."""
    digest = hashlib.sha256()
    digest.update(fingerprint.encode())
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class CachedTensors:
    tensors: dict[str, Tensor]
    path: Path
    computed: bool  # False when read from the cache


def cached_tensors(
    cache_dir: str | Path,
    fingerprint: str,
    texts: Sequence[str],
    settings: dict[str, Any],
    compute: Callable[[], dict[str, Tensor]],
) -> CachedTensors:
    """The tensors computed from ``texts``, from the cache, or ``compute()``d and stored there."""
    path = Path(cache_dir) / f"{cache_key(fingerprint, texts, settings)}.safetensors"
    if path.is_file():
        try:
            return CachedTensors(load_file(str(path)), path, computed=False)
        except (SafetensorError, OSError):
            pass  # unreadable entry: compute it again and replace it
    tensors = {name: tensor.contiguous() for name, tensor in compute().items()}
    metadata = {"texts": str(len(texts)), "settings": json.dumps(settings, sort_keys=True)}
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))
    return CachedTensors(tensors, path, computed=True)


@dataclass(frozen=True)
class CachedVectors:
    vectors: LayerVectors
    path: Path
    computed: bool  # False when read from the cache


def cached_layer_vectors(
    cache_dir: str | Path,
    fingerprint: str,
    texts: Sequence[str],
    settings: dict[str, Any],
    compute: Callable[[], LayerVectors],
) -> CachedVectors:
    """Per-layer text vectors of ``texts`` from the cache, or ``compute()``d and stored there."""

    def tensors() -> dict[str, Tensor]:
        vectors = compute()
        return {"cls": vectors.cls, "mean": vectors.mean}

    cached = cached_tensors(cache_dir, fingerprint, texts, settings, tensors)
    stored = cached.tensors
    if "cls" not in stored or "mean" not in stored or stored["cls"].shape[0] != len(texts):
        cached.path.unlink()  # a foreign or damaged entry under this key: replace it
        cached = cached_tensors(cache_dir, fingerprint, texts, settings, tensors)
        stored = cached.tensors
    return CachedVectors(LayerVectors(stored["cls"], stored["mean"]), cached.path, cached.computed)
