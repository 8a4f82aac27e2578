"""Inverted dropout whose mask is cheap to draw on CPU.

torch's CPU dropout draws its mask with ``bernoulli_``, one trip into the random engine per
element: on a training batch of encoder states, ``(32, 40, 512)``, that costs about as much as
a tenth of the BiLSTM's forward pass. Here the mask comes from 64-bit random words
(``random_``), each cut into four 15-bit uniform draws, then one comparison. The keep
probability is exact to 1/32768 and the output is rescaled by exactly its inverse, so the
expectation is unchanged. The draws come from torch's default generator, so
``torch.manual_seed`` makes them repeatable. Off CPU, torch's own dropout runs.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional

_LEVELS = 1 << 15  # each draw is uniform over 0 .. 32767


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> tuple[Tensor, float]:
    """``(keep, scale)``: a bool tensor of ``shape``, each element True with probability
    ``1 - p`` (to 1/32768), and the factor that keeps the expectation: 1 / P(keep)."""
    count = math.prod(shape)
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device="cpu").random_()
    # random_ fills int64 from 0 to 2**63 - 1: the top bit is always 0, so each 16-bit piece
    # keeps only its low 15 bits, all uniform.
    draws = words.view(torch.int16)[:count].view(shape) & (_LEVELS - 1)
    threshold = round(p * _LEVELS)
    return draws >= threshold, _LEVELS / (_LEVELS - threshold)


def draws_on_the_host(x: Tensor) -> bool:
    """Whether :func:`dropout` draws its own mask for ``x``: on the CPU. Elsewhere torch's
    fused dropout is one kernel forward and one backward, where this mask would be six."""
    return x.device.type == "cpu"


class _MaskedScale(torch.autograd.Function):
    """``x * keep * scale``, saving only the bool mask for the backward pass."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.mul(x, keep).mul_(scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return torch.mul(grad, keep).mul_(ctx.scale), None, None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element of ``x`` with probability ``p`` and scale the rest by about
    ``1 / (1 - p)`` when ``training``; ``x`` itself otherwise. Any shape."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return x
    if not draws_on_the_host(x) or round(p * _LEVELS) == _LEVELS:
        return functional.dropout(x, p, True)
    keep, scale = keep_mask(x.shape, p)
    return _MaskedScale.apply(x, keep, scale)


class Dropout(nn.Module):
    """``nn.Dropout`` with the cheaper CPU mask of :func:`dropout`; no parameters or state."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def part_dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero whole vectors of ``x`` ``(..., size)`` with probability ``p`` (every position's
    vector is kept or dropped as one) and scale the kept ones by about ``1 / (1 - p)`` when
    ``training``: feature dropout for one stacked part of a token's representation."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return x
    if round(p * _LEVELS) == _LEVELS:
        return x * 0.0
    if not draws_on_the_host(x):
        keep = torch.rand(x.shape[:-1], device=x.device) >= p
        return x * keep.unsqueeze(-1) / (1.0 - p)
    keep, scale = keep_mask(x.shape[:-1], p)
    return _MaskedScale.apply(x, keep.unsqueeze(-1), scale)
