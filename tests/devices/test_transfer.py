"""Batches reach a CUDA device through pinned memory, without the host waiting for the copy.

This machine has no CUDA device: the meta device stands in for one (every tensor moved to it
must have been pinned and sent non-blocking), and ``pin_memory`` is recorded, not performed."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bistack import transfer
from bistack.data.batching import TaggingBatch, TextBatch
from bistack.language_models.network import LMBatch
from bistack.models.backbone import SubwordBatch
from bistack.models.word_pieces import WordPieces
from bistack.taggers.networks.layer_network import WordLayerBatch
from bistack.text_models.layer_network import LayerBatch, StackedSubwords


def ids(*shape: int) -> torch.Tensor:
    return torch.ones(shape, dtype=torch.long)


def tokens(kind=TaggingBatch, **extra) -> TaggingBatch:
    fields = dict(words=ids(2, 3), casing=ids(2, 3), chars=ids(4, 5), char_lengths=ids(4))
    return kind(**fields, char_index=ids(2, 3), mask=ids(2, 3).bool(), lengths=ids(2), **extra)


def subwords() -> SubwordBatch:
    return SubwordBatch(ids(3, 7), ids(3, 7), ids(3), 2, torch.zeros(2))


BATCHES = {
    "tagging": tokens(tags=ids(2, 3)),
    "text": tokens(TextBatch, targets=ids(2)),
    "language model": LMBatch(ids(2, 3), ids(2, 3), ids(2, 3).bool()),
    "layer vectors": LayerBatch(torch.zeros(2, 6, 8), ids(2), tokens(TextBatch)),
    "subwords": subwords(),
    "stacked subwords": StackedSubwords(subwords(), tokens(TextBatch)),
    "word states": WordLayerBatch(
        ids(2, 3).bool(), ids(2), torch.zeros(2, 3, 6, 8), tags=ids(2, 3)
    ),
    "word pieces": WordLayerBatch(
        ids(2, 3).bool(),
        ids(2),
        pieces=WordPieces(ids(2, 7), ids(2, 7), ids(14), ids(5), ids(5), [2, 3]),
    ),
}


def tensors_of(value, kept: bool = False) -> list[torch.Tensor]:
    """The tensors of a batch that travel to its device (``kept``: those it keeps on the
    host)."""
    if isinstance(value, torch.Tensor):
        return [value] if not kept else []
    if dataclasses.is_dataclass(value):
        host = getattr(value, "HOST_FIELDS", frozenset())
        found = []
        for f in dataclasses.fields(value):
            part = getattr(value, f.name)
            if f.name in host and isinstance(part, torch.Tensor):
                found += [part] if kept else []
            else:
                found += tensors_of(part, kept)
        return found
    return []


@pytest.fixture
def copies(monkeypatch):
    """Each host tensor pinned, and each move's ``non_blocking``, as the batches are moved to a
    device treated as CUDA is."""
    pinned: list[torch.Tensor] = []
    moves: list[bool] = []
    monkeypatch.setattr(transfer, "PINNED_DEVICE_TYPES", frozenset({"meta"}))
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self) or self)
    move = torch.Tensor.to

    def recorded(self, *args, **kwargs):
        moves.append(bool(kwargs.get("non_blocking", False)))
        return move(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", recorded)
    return pinned, moves


@pytest.mark.parametrize("name", list(BATCHES))
def test_every_tensor_of_a_batch_goes_to_the_device_pinned_and_without_waiting(name, copies):
    pinned, moves = copies
    batch = BATCHES[name]
    moved = batch.to("meta")
    assert type(moved) is type(batch)
    host, placed = tensors_of(batch), tensors_of(moved)
    assert len(placed) == len(host) > 0
    assert all(t.device.type == "meta" for t in placed)
    assert sorted(map(id, pinned)) == sorted(map(id, host))  # each once
    assert moves == [True] * len(host)
    kept = tensors_of(batch, kept=True)  # lengths, which packing orders on the host
    assert all(a is b for a, b in zip(tensors_of(moved, kept=True), kept, strict=True))
    assert (len(kept) > 0) is not isinstance(batch, LMBatch | SubwordBatch)


def test_a_batch_for_the_cpu_is_neither_pinned_nor_copied(copies):
    pinned, _ = copies
    batch = BATCHES["tagging"]
    moved = batch.to("cpu")
    assert pinned == []
    assert all(a is b for a, b in zip(tensors_of(moved), tensors_of(batch), strict=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
@pytest.mark.parametrize("name", list(BATCHES))
def test_a_batch_copied_without_waiting_arrives_whole_on_a_gpu(name):
    batch = BATCHES[name]
    moved = batch.to("cuda")
    after = [t.cpu() for t in tensors_of(moved)]  # each copy waits for the one before it
    assert all(torch.equal(a, b) for a, b in zip(after, tensors_of(batch), strict=True))
