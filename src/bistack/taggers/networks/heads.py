"""Tagging heads over per-position states: softmax or a scheme-constrained CRF.

A head trains (``loss``) and scores positions (``emissions``); what the scores mean, the tags,
their confidences and the k best analyses, is its
:class:`~bistack.taggers.emissions.decoding.TagDecoder`,
the same code an exported model's runtime runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from bistack.crf import CRF
from bistack.data.batching import PAD_TAG
from bistack.schemes import allowed_transitions
from bistack.taggers.config import HeadConfig
from bistack.taggers.emissions.confidence import CRFScores
from bistack.taggers.emissions.decoding import TagDecoder


class SoftmaxHead(nn.Module):
    """Independent per-position classification over ``labels`` (tags in ``scheme``); padding is
    excluded from the loss."""

    crf: CRF | None = None  # tokens are independent

    def __init__(self, input_size: int, labels: Sequence[str], scheme: str) -> None:
        super().__init__()
        self.project = nn.Linear(input_size, len(labels))
        self.labels = list(labels)
        self.scheme = scheme

    def loss(self, states: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """Mean cross-entropy over real tokens; tags ``(batch, seq)`` hold -100 at padding."""
        emissions = self.project(states)  # (batch, seq, num_tags)
        tags = tags.masked_fill(~mask, PAD_TAG)
        return F.cross_entropy(emissions.flatten(0, 1), tags.flatten(), ignore_index=PAD_TAG)

    def emissions(self, states: Tensor) -> Tensor:
        """Tag scores ``(batch, seq, num_tags)`` (logits of the token's tag)."""
        return self.project(states)

    def decoder(self) -> TagDecoder:
        return TagDecoder(self.labels, self.scheme)


class CRFHead(nn.Module):
    """Emissions from a linear layer, scored as whole sequences by a constrained CRF."""

    def __init__(self, input_size: int, labels: list[str], scheme: str) -> None:
        super().__init__()
        self.project = nn.Linear(input_size, len(labels))
        self.crf = CRF(len(labels), allowed_transitions(scheme, labels), names=labels)
        self.labels = list(labels)
        self.scheme = scheme
        # The decoder and the parameters' (address, version) it was read from.
        self._decoder: tuple[list[tuple[int, int]], TagDecoder] | None = None

    def loss(self, states: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """CRF negative log-likelihood per real token (the same scale as cross-entropy); the
        mask and tags are a collated batch's (checked there: ``bistack.masking``)."""
        # Every gold path is allowed: convert_tags rewrites the tags from their entities in the
        # CRF's scheme.
        emissions = self.project(states)
        return self.crf.nll(emissions, tags, mask, reduction="token_mean", validate=False)

    def emissions(self, states: Tensor) -> Tensor:
        """Emission scores ``(batch, seq, num_tags)``, which the CRF scores as sequences."""
        return self.project(states)

    def train(self, mode: bool = True) -> CRFHead:
        self._decoder = None  # training changes the scores (a fused step bumps no version)
        return super().train(mode)

    def _apply(self, fn: Any, recurse: bool = True) -> CRFHead:
        self._decoder = None  # moved, or cast
        return super()._apply(fn, recurse)

    def decoder(self) -> TagDecoder:
        """The decoder of the CRF as it is now: its constrained scores copied to the host once,
        then again only after the model trained, moved, or had its weights written (loaded,
        or an average swapped in), not at every call, where a prediction on a GPU would wait
        for three copies."""
        crf = self.crf
        now = [(p.data_ptr(), p._version) for p in crf.parameters()]
        if self._decoder is None or self._decoder[0] != now:
            scores = (s.detach().float().cpu().numpy() for s in crf.constrained_scores())
            self._decoder = (now, TagDecoder(self.labels, self.scheme, CRFScores(*scores)))
        return self._decoder[1]


def build_tagging_head(
    options: HeadConfig, input_size: int, labels: Sequence[str], scheme: str
) -> SoftmaxHead | CRFHead:
    """The head a config's ``head`` section names, over states of ``input_size``."""
    if options.type == "crf":
        return CRFHead(input_size, list(labels), scheme)
    return SoftmaxHead(input_size, labels, scheme)
