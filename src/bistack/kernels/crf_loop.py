"""The CRF's log-partition as the field writes it: the forward algorithm, a loop over positions
with a log-sum-exp a step (a few launches a position, ``batch × num_tags²`` work each). On a
device, ``bistack.kernels.crf_choice`` says at which tag counts it beats the parallel scan."""

from __future__ import annotations

import torch
from torch import Tensor

from bistack.kernels.crf_scan import in_float32_or_wider


def log_partition_loop(
    emissions: Tensor, mask: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> Tensor:
    """log Z ``(batch,)``, with arguments as :func:`~bistack.kernels.crf_scan.log_partition_scan`
    takes them. Differentiable (autograd through the loop)."""
    emissions, transitions, start, end = in_float32_or_wider(emissions, transitions, start, end)
    score = start + emissions[:, 0]  # (batch, num_tags): paths ending in each tag so far
    for position in range(1, emissions.size(1)):
        moved = score.unsqueeze(2) + transitions + emissions[:, position].unsqueeze(1)
        score = torch.where(mask[:, position, None], torch.logsumexp(moved, dim=1), score)
    return torch.logsumexp(score + end, dim=1)
