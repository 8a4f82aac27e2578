"""The feature cache, keyed by text: each text's vectors computed once, read back in any order,
subset or superset (only the texts missing are computed), and recomputed when the model or the
settings change."""

from __future__ import annotations

import torch

from bistack.models.backbone import LayerVectors
from bistack.models.feature_cache import cached_layer_vectors


class Counter:
    """A stand-in backbone computation: each text's vectors are its length, and every text it
    computes is counted."""

    def __init__(self, texts) -> None:
        self.texts = list(texts)
        self.computed: list[str] = []

    def __call__(self, indices) -> LayerVectors:
        chosen = [self.texts[i] for i in indices]
        self.computed += chosen
        cls = torch.stack([torch.full((2, 3), float(len(t))) for t in chosen])
        return LayerVectors(cls, -cls)


def lookup(cache, texts, fingerprint="model-a", settings=None, counter=None):
    settings = settings or {"max_length": 128, "long_texts": "truncate"}
    counter = counter or Counter(texts)
    counter.texts = list(texts)
    return cached_layer_vectors(cache, fingerprint, list(texts), settings, counter), counter


def expected(texts) -> torch.Tensor:
    return torch.stack([torch.full((2, 3), float(len(t))) for t in texts])


def test_vectors_are_computed_once_then_read_back(tmp_path):
    first, counter = lookup(tmp_path, ["one", "three"])
    second, _ = lookup(tmp_path, ["one", "three"], counter=counter)
    assert (first.computed, second.computed) == (2, 0) and counter.computed == ["one", "three"]
    assert second.said == "read from the cache"
    torch.testing.assert_close(second.vectors.cls, expected(["one", "three"]))
    assert first.path == second.path and first.path.is_dir()


def test_another_order_a_subset_or_a_superset_computes_only_what_is_missing(tmp_path):
    texts = [f"text number {n}" * (n % 3 + 1) for n in range(12)]
    _, counter = lookup(tmp_path, texts)
    shuffled = texts[::-1][3:] + texts[::-1][:3]
    again, _ = lookup(tmp_path, shuffled, counter=counter)
    assert again.computed == 0 and again.said == "read from the cache"
    torch.testing.assert_close(again.vectors.cls, expected(shuffled))
    torch.testing.assert_close(again.vectors.mean, -expected(shuffled))
    subset, _ = lookup(tmp_path, texts[4:7], counter=counter)
    assert subset.computed == 0
    more = [*texts, "new one", "new two", "new one"]  # a repeat is computed once
    superset, _ = lookup(tmp_path, more, counter=counter)
    assert superset.computed == 2 and counter.computed[-2:] == ["new one", "new two"]
    assert superset.said == "12 read from the cache, 2 computed and cached"
    torch.testing.assert_close(superset.vectors.cls, expected(more))


def test_a_change_of_model_or_settings_computes_anew(tmp_path):
    _, counter = lookup(tmp_path, ["one", "two"])
    assert lookup(tmp_path, ["one", "two"], fingerprint="model-b", counter=counter)[0].computed
    settings = {"max_length": 64, "long_texts": "truncate"}
    assert lookup(tmp_path, ["one", "two"], settings=settings, counter=counter)[0].computed
    assert len(counter.computed) == 6
    assert not lookup(tmp_path, ["two", "one"], counter=counter)[0].computed  # still there


def test_an_unreadable_shard_is_recomputed_not_trusted(tmp_path):
    first, counter = lookup(tmp_path, ["one", "two"])
    (shard,) = first.path.glob("*.safetensors")
    shard.write_bytes(b"not safetensors")
    again, _ = lookup(tmp_path, ["one", "two"], counter=counter)
    assert again.computed == 2
    torch.testing.assert_close(again.vectors.cls, expected(["one", "two"]))
    assert not list(tmp_path.rglob(".*.bistack-tmp*"))  # nothing half-written left behind
