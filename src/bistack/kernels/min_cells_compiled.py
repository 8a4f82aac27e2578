"""The linear scan of minGRU/minLSTM layers, compiled for CPU: ``h_t = a_t ⊙ h_{t-1} + b_t``,
left to right, or right to left from each sequence's own last position (the backward direction
of a bidirectional layer, which so needs no reversed copy of its inputs and outputs).

Why compiled: in eager PyTorch the log-space scan (``torch.logcumsumexp``, its backward, and the
softplus/log/exp around it) costs far more than the layer's one matrix product: about 50 ns an
element for ``logcumsumexp`` alone on this CPU. The scan in linear space is one multiply-add an
element, and runs as one numba loop over time whose inner loop over hidden units vectorises;
its backward is the same loop reversed. Linear space is exact and cannot overflow here, since
``0 < a_t < 1`` and each state is a convex combination of the previous one and a bounded
candidate (log space is what a *parallel* prefix product needs on a GPU, where ``Π a_t``
underflows; a scan over time never forms it). The gates around it stay vectorised torch ops.

The eager log-space scan in :mod:`bistack.min_cells` stays for other devices and as the
reference the tests hold this kernel to (values and gradients).
"""

from __future__ import annotations

from typing import Any

import numba
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


def runs_compiled(coefficients: Tensor) -> bool:
    """Whether this kernel takes ``coefficients``: float32/float64 on CPU."""
    return coefficients.device.type == "cpu" and coefficients.dtype in (
        torch.float32,
        torch.float64,
    )


@numba.njit(cache=True, nogil=True)
def _scan_kernel(keep, add, lengths, backward, states):  # pragma: no cover
    """``states[:, t] = keep[:, t] * states[:, t -/+ 1] + add[:, t]`` from the zero state, all
    ``(batch, seq, hidden)``; ``backward``: from position ``lengths[b] - 1`` down to 0, with 0
    at the padding after it."""
    batch_size, seq_len, hidden = states.shape
    for b in range(batch_size):
        if not backward:
            for j in range(hidden):
                states[b, 0, j] = add[b, 0, j]
            for t in range(1, seq_len):
                for j in range(hidden):
                    states[b, t, j] = keep[b, t, j] * states[b, t - 1, j] + add[b, t, j]
            continue
        last = lengths[b] - 1
        for t in range(last + 1, seq_len):
            for j in range(hidden):
                states[b, t, j] = 0.0
        for j in range(hidden):
            states[b, last, j] = add[b, last, j]
        for t in range(last - 1, -1, -1):
            for j in range(hidden):
                states[b, t, j] = keep[b, t, j] * states[b, t + 1, j] + add[b, t, j]


@numba.njit(cache=True, nogil=True)
def _gradient_kernel(keep, grad_states, lengths, backward, grad_add):  # pragma: no cover
    """The gradient reaching each state, ``grad_add``: the scan's own recursion run the other
    way (``grad_states[:, t] + keep[:, t ± 1] * grad_add[:, t ± 1]``)."""
    batch_size, seq_len, hidden = grad_add.shape
    for b in range(batch_size):
        if not backward:
            last = seq_len - 1
            for j in range(hidden):
                grad_add[b, last, j] = grad_states[b, last, j]
            for t in range(last - 1, -1, -1):
                for j in range(hidden):
                    grad_add[b, t, j] = (
                        grad_states[b, t, j] + keep[b, t + 1, j] * grad_add[b, t + 1, j]
                    )
            continue
        length = lengths[b]
        for t in range(length, seq_len):
            for j in range(hidden):
                grad_add[b, t, j] = 0.0
        for j in range(hidden):
            grad_add[b, 0, j] = grad_states[b, 0, j]
        for t in range(1, length):
            for j in range(hidden):
                grad_add[b, t, j] = grad_states[b, t, j] + keep[b, t - 1, j] * grad_add[b, t - 1, j]


class LinearScan(torch.autograd.Function):
    """``(keep, add)`` ``(batch, seq, hidden)`` -> states ``h_t = keep_t h_{t-1} + add_t``; with
    ``lengths`` ``(batch,)`` and ``backward``, ``h_t = keep_t h_{t+1} + add_t`` from each
    sequence's last real position (0 at padding)."""

    @staticmethod
    def forward(
        ctx: Any,  # autograd's context: attributes set here are read in backward
        keep: Tensor,
        add: Tensor,
        lengths: Tensor,
        backward: bool,
    ) -> Tensor:
        keep = keep.detach().contiguous()
        add = add.detach().to(keep.dtype).contiguous()
        lengths = lengths.detach().to(device="cpu", dtype=torch.int64).contiguous()
        states = torch.empty_like(add)
        _scan_kernel(keep.numpy(), add.numpy(), lengths.numpy(), backward, states.numpy())
        ctx.save_for_backward(keep, states, lengths)
        ctx.backward = backward
        return states

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_states: Tensor) -> tuple[Tensor, Tensor, None, None]:
        keep, states, lengths = ctx.saved_tensors
        backward = ctx.backward
        grad_add = torch.empty_like(states)
        grad = grad_states.detach().to(states.dtype).contiguous()
        _gradient_kernel(keep.numpy(), grad.numpy(), lengths.numpy(), backward, grad_add.numpy())
        grad_keep = torch.zeros_like(states)
        if backward:  # each state's own predecessor is the one after it (0 past the end)
            grad_keep[:, :-1] = grad_add[:, :-1] * states[:, 1:]
        else:  # h_0 = 0: no gradient at t = 0
            grad_keep[:, 1:] = grad_add[:, 1:] * states[:, :-1]
        return grad_keep, grad_add, None, None
