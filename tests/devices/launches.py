"""The operators a GPU would launch for a call, counted on this CPU.

On a GPU a tagger's training step is launch-bound: its time is about the number of operators it
dispatches. :func:`launches` counts them below autograd (forward and backward, as a dispatch mode
sees them) with two corrections, so that the CPU's count is the one a GPU would make:

- views and other metadata-only operators (``view``, ``slice``, ``detach``...) launch nothing
  and are not counted;
- a recurrence (``nn.LSTM``/``nn.GRU``) is one operator forward and one backward, as cuDNN runs
  it, where this CPU decomposes a packed one into a few hundred (on both sides of a comparison
  alike, which would hide every other difference).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

RECURRENCES = (torch._VF.lstm, torch._VF.gru)  # what nn.LSTM and nn.GRU call
NO_LAUNCH = {torch.ops.aten.detach, torch.ops.aten.alias, torch.ops.aten.lift_fresh}


class _Recurrences(TorchFunctionMode):
    """Marks each recurrence's call: its inner operators go uncounted, and the autograd nodes
    its outputs were made by are remembered (their backward is one operator)."""

    def __init__(self, counter: _Counter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in RECURRENCES:
            return func(*args, **(kwargs or {}))
        before = {t.grad_fn for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        self.counter.inside += 1
        try:
            result = func(*args, **(kwargs or {}))
        finally:
            self.counter.inside -= 1
        self.counter.counted[f"{func.__name__} (one cuDNN call)"] += 1
        call = len(self.counter.recurrences)
        self.counter.recurrences.append(func.__name__)
        outputs = [t.grad_fn for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        for node in _nodes_back_to(outputs, before):
            self.counter.node_call[node] = call
        return result


def _nodes_back_to(starts: list, boundary: set) -> Iterator[Any]:
    """The autograd nodes from ``starts`` back to ``boundary`` or a leaf's gradient, exclusive."""
    stack, seen = [n for n in starts if n is not None], set()
    while stack:
        node = stack.pop()
        if node in seen or node in boundary or node.name() == "torch::autograd::AccumulateGrad":
            continue
        seen.add(node)
        yield node
        stack.extend(n for n, _ in node.next_functions if n is not None)


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counted: collections.Counter = collections.Counter()
        self.inside = 0
        self.recurrences: list[str] = []
        self.node_call: dict[Any, int] = {}
        self.backward_calls: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if self.inside or func.is_view or func.overloadpacket in NO_LAUNCH:
            return result
        call = self.node_call.get(torch._C._current_autograd_node())
        if call is None:
            self.counted[str(func.overloadpacket)] += 1
        elif call not in self.backward_calls:
            self.backward_calls.add(call)
            self.counted[f"{self.recurrences[call]} backward (one cuDNN call)"] += 1
        return result


def launches(call: Callable[[], object]) -> collections.Counter:
    """The operators ``call`` would launch on a GPU, by name (see the module's docstring)."""
    counter = _Counter()
    with _Recurrences(counter), counter:
        call()
    return counter.counted
