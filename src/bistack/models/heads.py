"""Tagging heads over per-position states: softmax or a scheme-constrained CRF."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bistack.analysis import Analysis
from bistack.confidence import (
    crf_marginals,
    crf_span_probabilities,
    independent_best_paths,
    independent_span_probabilities,
    span_event,
    spans_of,
)
from bistack.config import HeadConfig
from bistack.crf import CRF
from bistack.data.batching import PAD_TAG
from bistack.schemes import PLAIN, allowed_transitions

HeadType = Literal["softmax", "crf"]


class SoftmaxHead(nn.Module):
    """Independent per-position classification over ``labels`` (tags in ``scheme``); padding is
    excluded from the loss."""

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

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        """Best tag per position ``(batch, seq)``, 0 at padding."""
        return self.project(states).argmax(dim=-1) * mask

    def analyse(self, states: Tensor, mask: Tensor, top_k: int = 1) -> list[Analysis]:
        """Per sentence: the best tags, their probabilities, each entity's probability, and
        with ``top_k`` > 1 the ``top_k`` best analyses with their probabilities."""
        probabilities = self.project(states).softmax(dim=-1)  # (batch, seq, num_tags)
        confidence, best = probabilities.max(dim=-1)
        results = []
        for row, length in enumerate(mask.sum(dim=1).tolist()):
            path = best[row, :length].tolist()
            spans = [] if self.scheme == PLAIN else spans_of(path, self.labels)
            events = [span_event(s, path, self.labels, self.scheme) for s in spans]
            chances = independent_span_probabilities(probabilities[row], length, events)
            token = confidence[row, :length].tolist()
            alternatives = []
            if top_k > 1:
                log_probabilities = probabilities[row, :length].log()
                alternatives = independent_best_paths(log_probabilities, top_k)
            entities = dict(zip(spans, chances, strict=True))
            results.append(Analysis(path, token, entities, alternatives))
        return results


class CRFHead(nn.Module):
    """Emissions from a linear layer, scored as whole sequences by a constrained CRF."""

    def __init__(self, input_size: int, labels: list[str], scheme: str) -> None:
        super().__init__()
        self.project = nn.Linear(input_size, len(labels))
        self.crf = CRF(len(labels), allowed_transitions(scheme, labels), names=labels)
        self.labels = list(labels)
        self.scheme = scheme

    def loss(self, states: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """CRF negative log-likelihood per real token (the same scale as cross-entropy)."""
        return self.crf.nll(self.project(states), tags, mask, reduction="token_mean")

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        """Viterbi path ``(batch, seq)``, 0 at padding."""
        return self.crf.decode(self.project(states), mask).best

    def analyse(self, states: Tensor, mask: Tensor, top_k: int = 1) -> list[Analysis]:
        """Per sentence: the Viterbi tags, each token's marginal probability of its tag, each
        entity's exact probability under the CRF (``bistack.confidence``), and with ``top_k``
        > 1 the ``top_k`` best paths with their probabilities."""
        emissions = self.project(states)  # (batch, seq, num_tags)
        decoding = self.crf.decode(emissions, mask, top_k)
        paths = decoding.to_lists()
        marginals = crf_marginals(self.crf, emissions, mask)
        alternatives = [[] for _ in paths]
        if top_k > 1:
            transitions, start, end = (t.detach() for t in self.crf.constrained_scores())
            log_z = self.crf._log_partition(emissions.detach(), mask, transitions, start, end)
            chances = (decoding.scores - log_z.unsqueeze(1)).exp().tolist()  # (batch, top_k)
            for rank in range(top_k):
                for row, path in enumerate(decoding.to_lists(rank)):
                    if chances[row][rank] > 0:  # a path that does not exist scores -inf
                        alternatives[row].append((path, chances[row][rank]))
        results = []
        for row, path in enumerate(paths):
            positions = torch.arange(len(path), device=emissions.device)
            chosen = torch.tensor(path, dtype=torch.long, device=emissions.device)
            token = marginals[row, positions, chosen].tolist()
            spans = [] if self.scheme == PLAIN else spans_of(path, self.labels)
            events = [span_event(s, path, self.labels, self.scheme) for s in spans]
            chances = crf_span_probabilities(self.crf, emissions[row], len(path), events)
            entities = dict(zip(spans, chances, strict=True))
            results.append(Analysis(path, token, entities, alternatives[row]))
        return results


def build_tagging_head(
    options: HeadConfig, input_size: int, labels: Sequence[str], scheme: str
) -> SoftmaxHead | CRFHead:
    """The head a config's ``head`` section names, over states of ``input_size``."""
    if options.type == "crf":
        return CRFHead(input_size, list(labels), scheme)
    return SoftmaxHead(input_size, labels, scheme)
