"""Masked sequence pooling: collapse ``(batch_size, seq_len, hidden)`` states to one vector.

Each pooler returns a :class:`Pooled` with the vector and, for attention, the weights. Padding
never contributes: attention scores are filled with -inf before the softmax ("Attention:
choosing which positions matter"), so padding weight is exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from bistack.encoders import last_real_states
from bistack.masking import check_mask, masked_max, masked_mean, masked_softmax

PoolingName = Literal["last", "mean", "max", "additive", "dot"]


@dataclass(frozen=True)
class Pooled:
    """vector: ``(batch_size, hidden)``; weights: ``(batch_size, seq_len)`` or None."""

    vector: Tensor
    weights: Tensor | None


class LastStatePooling(nn.Module):
    """The final-state summary read off the states: forward at ``len - 1`` ⊕ backward at 0.

    For a unidirectional encoder this is the state at ``len - 1``. It equals the encoder's
    ``summary``, and never ``h_n[-1]`` (the backward direction alone).
    """

    def __init__(self, bidirectional: bool) -> None:
        super().__init__()
        self.bidirectional = bidirectional

    def forward(self, states: Tensor, mask: Tensor, *, validate: bool = True) -> Pooled:
        if validate:
            check_mask(mask, tuple(states.shape[:2]))
        return Pooled(last_real_states(states, mask.sum(dim=1), self.bidirectional), None)


class MeanPooling(nn.Module):
    """Mean over real positions."""

    def forward(self, states: Tensor, mask: Tensor, *, validate: bool = True) -> Pooled:
        return Pooled(masked_mean(states, mask, validate=validate), None)


class MaxPooling(nn.Module):
    """Element-wise max over real positions."""

    def forward(self, states: Tensor, mask: Tensor, *, validate: bool = True) -> Pooled:
        return Pooled(masked_max(states, mask, validate=validate), None)


class AdditiveAttention(nn.Module):
    """Additive (Bahdanau) attention: ``e_t = v · tanh(W h_t)``, softmax over real positions."""

    def __init__(self, input_size: int, attention_size: int = 128) -> None:
        super().__init__()
        self.project = nn.Linear(input_size, attention_size, bias=False)
        self.score = nn.Linear(attention_size, 1, bias=False)

    def forward(self, states: Tensor, mask: Tensor, *, validate: bool = True) -> Pooled:
        """states ``(batch, seq, input_size)``, mask ``(batch, seq)`` -> ``(batch, input_size)``."""
        scores = self.score(torch.tanh(self.project(states))).squeeze(-1)  # (batch, seq)
        return attend(states, scores, mask, validate)


class DotProductAttention(nn.Module):
    """Dot-product attention with a learned query: ``e_t = q · h_t / sqrt(hidden)``."""

    def __init__(self, input_size: int) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.randn(input_size) / input_size**0.5)
        self.scale = input_size**-0.5

    def forward(self, states: Tensor, mask: Tensor, *, validate: bool = True) -> Pooled:
        """states ``(batch, seq, input_size)``, mask ``(batch, seq)`` -> ``(batch, input_size)``."""
        scores = states @ self.query * self.scale  # (batch, seq)
        return attend(states, scores, mask, validate)


def attend(states: Tensor, scores: Tensor, mask: Tensor, validate: bool = True) -> Pooled:
    """Weighted average of ``states`` by the masked softmax of ``scores`` ``(batch, seq)``."""
    weights = masked_softmax(scores, mask, validate=validate)  # (batch, seq), 0 at padding
    vector = torch.bmm(weights.unsqueeze(1), states).squeeze(1)  # (batch, hidden)
    return Pooled(vector, weights)


def build_pooling(name: PoolingName, input_size: int, *, bidirectional: bool) -> nn.Module:
    """Build the pooler named in a config; every one maps to ``input_size`` features."""
    if name == "last":
        return LastStatePooling(bidirectional)
    if name == "mean":
        return MeanPooling()
    if name == "max":
        return MaxPooling()
    if name == "additive":
        return AdditiveAttention(input_size)
    if name == "dot":
        return DotProductAttention(input_size)
    raise ValueError(
        f"unknown pooling: {name!r} (expected 'last', 'mean', 'max', 'additive' or 'dot')"
    )
