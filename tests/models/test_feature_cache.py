"""The feature cache: computed once, reused, and recomputed when model, data or settings change."""

from __future__ import annotations

import torch

from bistack.models.backbone import LayerVectors
from bistack.models.feature_cache import cached_layer_vectors


class Counter:
    """A stand-in backbone computation that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, count: int) -> LayerVectors:
        self.calls += 1
        return LayerVectors(torch.full((count, 2, 3), float(self.calls)), torch.zeros(count, 2, 3))


def lookup(cache, compute, fingerprint="model-a", texts=("one", "two"), settings=None):
    settings = settings or {"max_length": 128, "long_texts": "truncate"}
    return cached_layer_vectors(
        cache, fingerprint, list(texts), settings, lambda: compute(len(texts))
    )


def test_vectors_are_computed_once_then_read_back(tmp_path):
    compute = Counter()
    first = lookup(tmp_path, compute)
    second = lookup(tmp_path, compute)
    assert (first.computed, second.computed, compute.calls) == (True, False, 1)
    torch.testing.assert_close(first.vectors.cls, second.vectors.cls)
    assert first.path == second.path and first.path.suffix == ".safetensors"


def test_a_change_of_model_data_or_settings_computes_anew(tmp_path):
    compute = Counter()
    lookup(tmp_path, compute)
    assert lookup(tmp_path, compute, fingerprint="model-b").computed
    assert lookup(tmp_path, compute, texts=("one", "three")).computed
    assert lookup(tmp_path, compute, texts=("two", "one")).computed  # order is part of the data
    assert lookup(tmp_path, compute, settings={"max_length": 64, "long_texts": "truncate"}).computed
    assert compute.calls == 5
    assert not lookup(tmp_path, compute).computed  # the first entry is still there
    assert compute.calls == 5


def test_an_unreadable_entry_is_recomputed_not_trusted(tmp_path):
    compute = Counter()
    entry = lookup(tmp_path, compute).path
    entry.write_bytes(b"not safetensors")
    again = lookup(tmp_path, compute)
    assert again.computed and compute.calls == 2
    assert not list(tmp_path.glob(".*.bistack-tmp*"))  # nothing half-written left behind
