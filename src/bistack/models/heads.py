"""Tagging heads over per-position states: softmax or a scheme-constrained CRF."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

from bistack.config import HeadConfig
from bistack.crf import CRF
from bistack.data.batching import PAD_TAG
from bistack.schemes import allowed_transitions

HeadType = Literal["softmax", "crf"]


class SoftmaxHead(nn.Module):
    """Independent per-position classification; padding is excluded from the loss."""

    def __init__(self, input_size: int, num_tags: int) -> None:
        super().__init__()
        self.project = nn.Linear(input_size, num_tags)

    def loss(self, states: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """Mean cross-entropy over real tokens; tags ``(batch, seq)`` hold -100 at padding."""
        emissions = self.project(states)  # (batch, seq, num_tags)
        tags = tags.masked_fill(~mask, PAD_TAG)
        return F.cross_entropy(emissions.flatten(0, 1), tags.flatten(), ignore_index=PAD_TAG)

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        """Best tag per position ``(batch, seq)``, 0 at padding."""
        return self.project(states).argmax(dim=-1) * mask


class CRFHead(nn.Module):
    """Emissions from a linear layer, scored as whole sequences by a constrained CRF."""

    def __init__(self, input_size: int, labels: list[str], scheme: str) -> None:
        super().__init__()
        self.project = nn.Linear(input_size, len(labels))
        self.crf = CRF(len(labels), allowed_transitions(scheme, labels), names=labels)

    def loss(self, states: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """CRF negative log-likelihood per real token (the same scale as cross-entropy)."""
        return self.crf.nll(self.project(states), tags, mask, reduction="token_mean")

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        """Viterbi path ``(batch, seq)``, 0 at padding."""
        return self.crf.decode(self.project(states), mask).best


def build_tagging_head(
    options: HeadConfig, input_size: int, labels: Sequence[str], scheme: str
) -> SoftmaxHead | CRFHead:
    """The head a config's ``head`` section names, over states of ``input_size``."""
    if options.type == "crf":
        return CRFHead(input_size, list(labels), scheme)
    return SoftmaxHead(input_size, len(labels))
