"""Character encodings of the words already seen, for prediction.

In prediction a word's character encoding depends only on its spelling and the weights, yet the
char BiLSTM reruns it in every sentence that holds it: a third of a lone sentence's latency
(``benchmarks/results/batch1-profile.md``). Text is Zipfian, so nearly every word of the next
sentence has been spelled before. AllenNLP's ELMo caches its character-CNN token embeddings for
a vocabulary for the same reason; this cache fills as words arrive instead, so words outside
the training vocabulary gain too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a model runs: the corpus engine imports this module
    from torch import Tensor, nn  # without it, for exported models

_OFF: ContextVar[bool] = ContextVar("bistack_spelling_cache_off", default=False)


def spelling_cache_on() -> bool:
    """Whether prediction may read and fill the caches here: not in :func:`each_batch_alone`."""
    return not _OFF.get()


@contextmanager
def each_batch_alone() -> Iterator[None]:
    """Within this block no cache is read or filled, so each prediction depends on its own batch
    alone. A word's encoding computed in another batch differs in its last bits (the kernels
    block differently by batch size), so a cached one ties a prediction to what came before it:
    a resumable corpus run predicts its chunks within this block, so the chunks of a resumed
    run come out as an uninterrupted run wrote them, to the byte."""
    token = _OFF.set(True)
    try:
        yield
    finally:
        _OFF.reset(token)


class SpellingCache:
    """Encodings ``(size,)`` of up to ``capacity`` spellings in one table, the oldest forgotten
    first; it keeps a copy of the encoder's weights they were computed with, and is emptied
    whenever the weights differ from it, so it never answers with the encoding of older
    weights. The weights themselves are compared, not their version counters: a fused
    optimiser step (``torch.optim.Adam(fused=True)``, as training here runs) and a write
    through ``.data`` change a parameter without moving its counter. Comparing a char
    BiLSTM's weights (nine tensors, 12k numbers) costs about 10-20 µs a call. Safe to share
    between threads."""

    def __init__(self, capacity: int = 50_000) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._slots: dict[str, int] = {}
        self._owners: list[str] = []  # the spelling held in each slot, in slot order
        self._next = 0  # the slot written next once the table is full
        self._table: Tensor | None = None
        self._weights: list[Tensor] = []  # the encoder's weights when the table was filled

    def __len__(self) -> int:
        return len(self._slots)

    def __getstate__(self) -> dict:
        """A copy (``copy.deepcopy`` of a model, pickling to another process) starts empty:
        the lock cannot be copied, and the encodings are only ever a saving."""
        return {"capacity": self.capacity}

    def __setstate__(self, state: dict) -> None:
        SpellingCache.__init__(self, state["capacity"])

    def encode(
        self, encoder: nn.Module, spellings: Sequence[str], chars: Tensor, lengths: Tensor
    ) -> Tensor:
        """``encoder(chars, lengths)`` -> ``(len(spellings), size)``, where row ``i`` of
        ``chars`` (``(words, max_chars)``, with its ``lengths``) spells ``spellings[i]``; only
        the rows not cached are encoded (together, as the encoder batches them)."""
        import torch

        # Out of inference mode (whose tensors cannot be written outside it) and still
        # without gradients, so the table serves callers in either mode.
        with self._lock, torch.inference_mode(False), torch.no_grad():
            weights = list(encoder.parameters())
            if not self._same_weights(weights):
                self._clear()
                self._weights = [w.detach().clone() for w in weights]
            found = [self._slots.get(spelling) for spelling in spellings]  # its slot, or None
            missing = [i for i, slot in enumerate(found) if slot is None]
            slots = [slot for slot in found if slot is not None]
            if not missing and self._table is not None:
                return self._table[slots]
            fresh = encoder(chars[missing], lengths[missing])
            known = [i for i, slot in enumerate(found) if slot is not None]
            encoded = fresh.new_empty(len(spellings), fresh.size(1))
            encoded[missing] = fresh
            if known and self._table is not None:  # read before storing, which may forget one
                encoded[known] = self._table[slots]
            kept = missing[-self.capacity :]
            self._store([spellings[i] for i in kept], fresh[len(missing) - len(kept) :])
            return encoded

    def _same_weights(self, weights: Sequence[Tensor]) -> bool:
        import torch

        return len(weights) == len(self._weights) and all(
            (w.shape, w.dtype, w.device) == (kept.shape, kept.dtype, kept.device)
            and torch.equal(w, kept)
            for w, kept in zip(weights, self._weights, strict=True)
        )

    def _store(self, spellings: list[str], encodings: Tensor) -> None:
        """Keep ``encodings`` ``(len(spellings), size)``, forgetting the oldest when full."""
        needed = len(self._owners) + len(spellings)
        if self._table is None or (needed > len(self._table) and len(self._table) < self.capacity):
            rows = min(self.capacity, max(1024, 2 * needed))
            grown = encodings.new_empty(rows, encodings.size(1))
            if self._table is not None:
                grown[: len(self._owners)] = self._table[: len(self._owners)]
            self._table = grown
        slots = []
        for spelling in spellings:
            if len(self._owners) < self.capacity:
                slot = len(self._owners)
                self._owners.append(spelling)
            else:
                slot = self._next
                del self._slots[self._owners[slot]]
                self._owners[slot] = spelling
                self._next = (slot + 1) % self.capacity
            self._slots[spelling] = slot
            slots.append(slot)
        self._table[slots] = encodings

    def _clear(self) -> None:
        self._slots.clear()
        self._owners.clear()
        self._next = 0
        self._table = None
