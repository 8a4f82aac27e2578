"""On-disk cache of a frozen backbone's outputs, so each text's are computed once.

With the backbone frozen, a text's per-layer vectors (or a sentence's word states) never change:
pooler training reads them from here on every epoch, for every pooler compared and every fold.
The cache is keyed **by text**: a store (a folder) for each model (a hash of its folder's config
and weight files) and settings that change the outputs (maximum length, long-text handling,
stride, precision...), holding shards of texts, each text known by its digest. A table read in
another order, a subset of it or a superset reads what is there and computes only the texts
that are missing (once each, however often they repeat), written as a new shard. Shards are
safetensors files written atomically; an unreadable one is left out and its texts computed again.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from bistack.files.modeldir import atomic_write
from bistack.models.backbone import LayerVectors

_MODEL_FILES = ("config.json", "tokenizer.json", "vocab.txt")
_WEIGHT_SUFFIXES = (".safetensors", ".bin")
DIGESTS = "digests"  # a shard's (texts, 32) uint8: each text's sha256
# Each text's rows of a tensor: computed as a list (one tensor a text), stored concatenated
# with its ``NAME.offsets`` (texts + 1) beside it.
Rows = dict[str, list[Tensor]]


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


def store_key(fingerprint: str, settings: dict[str, Any]) -> str:
    """One store per (model, settings): its texts are looked up inside it."""
    digest = hashlib.sha256()
    digest.update(fingerprint.encode())
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return digest.hexdigest()[:32]


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


@dataclass(frozen=True)
class CachedRows:
    """Each asked text's rows of every tensor, in the order asked; the store they came from;
    how many distinct texts were computed now (0: every one read from the cache)."""

    rows: Rows
    path: Path
    computed: int
    read: int

    @property
    def said(self) -> str:
        """How the texts were found, in words."""
        if not self.computed:
            return "read from the cache"
        if not self.read:
            return "computed and cached"
        return f"{self.read} read from the cache, {self.computed} computed and cached"


def cached_rows(
    cache_dir: str | Path,
    fingerprint: str,
    texts: Sequence[str],
    settings: dict[str, Any],
    compute: Callable[[list[int]], Rows],
) -> CachedRows:
    """Each of ``texts``' rows from the store of ``fingerprint`` and ``settings``, the texts it
    lacks ``compute(indices)``d (indices into ``texts``, each distinct text once) and added to
    it as a shard."""
    store = Path(cache_dir) / store_key(fingerprint, settings)
    digests = [text_digest(text) for text in texts]
    found = _read_store(store)
    missing: dict[bytes, int] = {}
    for index, digest in enumerate(digests):
        if digest not in found and digest not in missing:
            missing[digest] = index
    if missing:
        chosen = list(missing.values())
        computed = compute(chosen)
        _write_shard(store, [digests[i] for i in chosen], computed, settings)
        for position, index in enumerate(chosen):
            found[digests[index]] = {name: rows[position] for name, rows in computed.items()}
    names = list(found[digests[0]]) if digests else []
    rows = {name: [found[digest][name] for digest in digests] for name in names}
    return CachedRows(rows, store, len(missing), len(set(digests)) - len(missing))


def _read_store(store: Path) -> dict[bytes, dict[str, Tensor]]:
    """Every text a store's readable shards hold: its rows of each tensor, by digest."""
    found: dict[bytes, dict[str, Tensor]] = {}
    for shard in sorted(store.glob("*.safetensors")):
        try:
            tensors = load_file(str(shard))
            digests = tensors.pop(DIGESTS)
            names = [name for name in tensors if not name.endswith(".offsets")]
            split = {
                name: tensors[name].tensor_split(tensors[f"{name}.offsets"][1:-1].tolist())
                for name in names
            }
            if any(len(parts) != len(digests) for parts in split.values()):
                continue  # damaged: its texts are computed again
        except (SafetensorError, OSError, KeyError, RuntimeError):
            continue
        for position, digest in enumerate(digests):
            found[bytes(digest.tolist())] = {name: split[name][position] for name in names}
    return found


def _write_shard(store: Path, digests: list[bytes], rows: Rows, settings: dict[str, Any]) -> None:
    """``rows`` of the texts ``digests`` as one shard of ``store``, named by its texts."""
    tensors: dict[str, Tensor] = {
        DIGESTS: torch.tensor([list(digest) for digest in digests], dtype=torch.uint8)
    }
    for name, parts in rows.items():
        lengths = torch.tensor([0] + [len(part) for part in parts])
        tensors[name] = torch.cat(parts).contiguous()
        tensors[f"{name}.offsets"] = torch.cumsum(lengths, 0)
    shard = hashlib.sha256(b"".join(digests)).hexdigest()[:32]
    metadata = {"texts": str(len(digests)), "settings": json.dumps(settings, sort_keys=True)}
    store.mkdir(parents=True, exist_ok=True)
    atomic_write(
        store / f"{shard}.safetensors", lambda tmp: save_file(tensors, tmp, metadata=metadata)
    )


@dataclass(frozen=True)
class CachedVectors:
    vectors: LayerVectors
    path: Path
    said: str  # how the texts were found: read, computed, or some of each
    computed: int  # distinct texts computed now


def cached_layer_vectors(
    cache_dir: str | Path,
    fingerprint: str,
    texts: Sequence[str],
    settings: dict[str, Any],
    compute: Callable[[list[int]], LayerVectors],
) -> CachedVectors:
    """Per-layer text vectors of ``texts`` ``(texts, layers, hidden)`` from the cache, those
    it lacks ``compute(indices)``d (their vectors, in that order) and stored there."""

    def rows(indices: list[int]) -> Rows:
        vectors = compute(indices)
        return {"cls": list(vectors.cls.unsqueeze(1)), "mean": list(vectors.mean.unsqueeze(1))}

    cached = cached_rows(cache_dir, fingerprint, texts, settings, rows)
    stacked = {name: torch.cat(parts) for name, parts in cached.rows.items()}
    return CachedVectors(
        LayerVectors(stacked["cls"], stacked["mean"]), cached.path, cached.said, cached.computed
    )
