"""Masks and masked reductions.

Convention everywhere in bistack: batch-first tensors, and ``mask`` is a ``bool`` tensor of
shape ``(batch_size, seq_len)`` with True at real tokens. Real tokens form a prefix of each row
(right padding), which is what packing and the CRF assume.

Checking a mask reads the device (its rows' lengths, whether it is right-padded). The blocks
check the masks they are given unless told ``validate=False``, which bistack's own networks
say of the masks their collation built from lengths on the host (right-padded by construction,
no empty row, checked there): a training step then never waits for the device to check them.
"""

from __future__ import annotations

import torch
from torch import Tensor


def lengths_to_mask(
    lengths: Tensor, max_len: int | None = None, *, validate: bool = True
) -> Tensor:
    """Turn lengths ``(batch_size,)`` into a bool mask ``(batch_size, max_len)``.

    ``max_len`` defaults to the longest length; a longer padded width keeps the mask aligned with
    a padded input (the total_length trap of ``pad_packed_sequence``). ``validate``: refuse a
    length over ``max_len`` (a read of the device).
    """
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (batch_size,), got shape {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be an integer tensor, got {lengths.dtype}")
    width = int(lengths.max()) if max_len is None else max_len
    if validate and max_len is not None and lengths.numel() and int(lengths.max()) > width:
        raise ValueError(f"lengths must be <= max_len={width}, got {int(lengths.max())}")
    positions = torch.arange(width, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def mask_to_lengths(mask: Tensor) -> Tensor:
    """Turn a right-padded bool mask ``(batch_size, seq_len)`` into lengths ``(batch_size,)``."""
    check_mask(mask)
    return mask.sum(dim=1)


def check_mask(mask: Tensor, shape: tuple[int, ...] | None = None) -> None:
    """Raise ValueError unless ``mask`` is a bool, 2-D, right-padded mask with no empty row."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = real token), got {mask.dtype}")
    if mask.dim() != 2:
        raise ValueError(f"mask must be 2-D (batch_size, seq_len), got shape {tuple(mask.shape)}")
    if shape is not None and tuple(mask.shape) != shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match input shape {shape}")
    lengths = mask.sum(dim=1)
    empty = (lengths == 0).nonzero().flatten()
    if empty.numel():
        raise ValueError(f"every row needs at least one real token; row {int(empty[0])} has none")
    # A right-padded row is all True up to its length: compare with the mask its length implies.
    if not torch.equal(mask, lengths_to_mask(lengths, mask.size(1))):
        bad = (mask != lengths_to_mask(lengths, mask.size(1))).any(dim=1).nonzero().flatten()
        raise ValueError(f"mask must be right-padded (real tokens first); row {int(bad[0])} is not")


def masked_softmax(scores: Tensor, mask: Tensor, *, validate: bool = True) -> Tensor:
    """Softmax of ``scores`` ``(batch_size, seq_len)`` over real positions only.

    Padding is filled with -inf before the softmax, so its weight is exactly 0. A row with no
    real token raises ValueError rather than returning NaN (``validate``: see the module).
    """
    if validate:
        check_mask(mask, tuple(scores.shape))
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def masked_mean(states: Tensor, mask: Tensor, *, validate: bool = True) -> Tensor:
    """Mean of ``states`` ``(batch, seq_len, hidden)`` over real positions: ``(batch, hidden)``."""
    if validate:
        check_mask(mask, tuple(states.shape[:2]))
    weights = mask.to(states.dtype).unsqueeze(-1)  # (batch, seq, 1)
    return (states * weights).sum(dim=1) / weights.sum(dim=1)


def masked_max(states: Tensor, mask: Tensor, *, validate: bool = True) -> Tensor:
    """Max of ``states`` ``(batch, seq_len, hidden)`` over real positions -> ``(batch, hidden)``."""
    if validate:
        check_mask(mask, tuple(states.shape[:2]))
    return states.masked_fill(~mask.unsqueeze(-1), float("-inf")).max(dim=1).values


def reversal_index(lengths: Tensor, seq_len: int) -> Tensor:
    """``(batch, seq_len)`` positions that reverse each row within its length, padding in place.

    Position ``t < length`` maps to ``length - 1 - t``; padding maps to itself. Applying the
    gather twice is the identity.
    """
    positions = torch.arange(seq_len, device=lengths.device).unsqueeze(0)
    lengths = lengths.unsqueeze(1)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)
