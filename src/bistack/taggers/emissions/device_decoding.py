"""A CRF tagger's analyses computed where its emissions are: on a GPU, the best paths, each
token's marginal and each entity's probability come from the CRF's parallel scan
(``bistack.kernels.crf_scan``) on the device, and the host receives the paths, the token
confidences and the partitions, not the emissions to run forward-backward over.

The same analyses as ``TagDecoder.analyse`` (best path only) computes on the host, by the same
closed form (``bistack.taggers.emissions.confidence``): one pass of the scan and its backward
give each token's marginals and each move's, and an entity's probability is its runs' (a run's:
its first tag's marginal times each move's over the tag before), with no partition more. Two
copies to the host a batch: the paths and their confidences (the entities follow from the
paths), then the runs' probabilities.

The host decodes the rest, from a copy of the emissions: tags alone (a Viterbi pass of the
compiled kernel takes microseconds; the scan runs 62 PyTorch operators for one sentence's best
path, 211 with its confidences), batches of fewer than ``device_rows`` sentences, a softmax
head's independent tokens, k-best lists, and every batch on the CPU, where the compiled kernels
are faster. ``device_rows`` is an estimate from those counts, not yet timed on a GPU
(``benchmarks/gpu.py`` times confidences both ways).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from bistack.kernels.crf_scan import posterior_scan, viterbi_scan
from bistack.taggers.emissions.confidence import (
    ClampedTerms,
    clamped_terms,
    span_probabilities,
)
from bistack.taggers.emissions.decoding import Analysis, TagDecoder
from bistack.taggers.models.tagging import EmissionBatch, Tagging
from bistack.transfer import to_device


class DeviceDecoding(Tagging):
    """A PyTorch tagger whose own pass leaves its emissions on its device: a CRF tagger's
    confidences in a batch of at least ``device_rows`` sentences there are computed there
    (:func:`device_analyses`)."""

    device_rows: int = 64  # the fewest sentences a batch decoded on the device has

    def decoded(
        self, decoder: TagDecoder, batch: EmissionBatch, confidence: bool, top_k: int
    ) -> list[Analysis]:
        if (
            confidence
            and top_k == 1
            and decoder.crf is not None
            and len(batch.lengths) >= self.device_rows
            and on_accelerator(batch.scores)
        ):
            moves = self.device_moves(decoder, batch.scores.device)
            return device_analyses(decoder, batch.scores, batch.lengths, moves)
        return super().decoded(decoder, batch, confidence, top_k)

    def device_moves(self, decoder: TagDecoder, device: torch.device) -> list[Tensor]:
        """The CRF's tempered transition, start and end scores on ``device`` in float64, copied
        there once for each decoder's scores, temperature and device (a copy a batch would
        make the host wait for it, three times a sentence at batch 1)."""
        crf = decoder.crf
        assert crf is not None
        key = (id(crf), decoder.temperature, device)
        kept: dict[tuple[int, float, torch.device], tuple[object, list[Tensor]]]
        kept = self.__dict__.setdefault("_device_moves", {})
        if key not in kept:
            moves = crf_moves(decoder, device)
            kept.clear()  # a model decodes at one temperature on one device at a time
            kept[key] = (crf, moves)  # the scores kept alive: their id stays theirs
        return kept[key][1]


def crf_moves(decoder: TagDecoder, device: torch.device) -> list[Tensor]:
    """A CRF decoder's tempered transition, start and end scores on ``device``, float64."""
    tempered = decoder.tempered_crf()
    if tempered is None:
        raise ValueError("device_analyses decodes a CRF's emissions; a softmax head has none")
    scores = (tempered.transitions, tempered.start, tempered.end)
    return [to_device(torch.from_numpy(s), device).double() for s in scores]


def on_accelerator(scores: object) -> bool:
    """Whether ``scores`` are a tensor on a device apart from the host (a GPU)."""
    return isinstance(scores, Tensor) and scores.device.type != "cpu"


def device_analyses(
    decoder: TagDecoder,
    emissions: Tensor,
    lengths: Sequence[int],
    moves: list[Tensor] | None = None,
) -> list[Analysis]:
    """``decoder.analyse(emissions, lengths)`` (with confidences) computed on the emissions'
    device: emissions ``(batch, seq_len, num_tags)``, row b real for its first ``lengths[b]``
    positions; a CRF decoder (its temperature applied as on the host), whose tempered scores
    ``moves`` are on that device where given (:meth:`DeviceDecoding.device_moves`). In float64,
    as the host's kernels sum: a log Z in the thousands (a sharp temperature) keeps 3 digits in
    float32. What goes to the device goes pinned and without waiting; the host waits twice."""
    device, width = emissions.device, max(lengths)
    moves = crf_moves(decoder, device) if moves is None else moves
    scores = emissions[:, :width].detach().float().double()
    if decoder.temperature != 1.0:  # divided as the host divides: in float32, rounded
        scores = (scores / float(np.float32(decoder.temperature))).float().double()
    real = to_device(torch.tensor(list(lengths)), device)
    mask = torch.arange(width, device=device)[None, :] < real[:, None]  # (batch, width)
    tags, _ = viterbi_scan(scores, mask, *moves)  # (batch, width), 0 at padding
    marginals, pairs = posterior_scan(scores, mask, *moves)
    token = marginals.gather(2, tags.unsqueeze(2)).squeeze(2)  # each token's marginal of its tag
    # The first read: the paths (the entities follow from them) and their confidences, in one
    # block (tag ids are exact in float64).
    read = torch.cat([tags.double(), token], dim=1).cpu().numpy()
    chosen, token_confidence = read[:, :width].astype(np.int64), read[:, width:]
    paths = [chosen[row, :n].tolist() for row, n in enumerate(lengths)]
    spans, events = decoder.span_events(paths)
    terms = clamped_terms(lengths, events)
    # The second read: each run's probability, from the marginals the one pass gave.
    chance = run_probabilities(marginals, pairs, terms).cpu().numpy() if len(terms) else np.zeros(0)
    chances = span_probabilities(events, terms, chance)
    return [
        Analysis(
            path,
            token_confidence[row, : len(path)].tolist(),
            dict(zip(spans[row], chances[row], strict=True)),
        )
        for row, path in enumerate(paths)
    ]


def run_probabilities(marginals: Tensor, pairs: Tensor, terms: ClampedTerms) -> Tensor:
    """Each run's probability ``(terms,)`` on the marginals' device, as the host's closed form
    gives it: its first tag's marginal times, for each tag after it, the move's marginal over
    the marginal of the tag before (:func:`~bistack.kernels.crf_scan.posterior_scan` gives
    both; a move that has none makes the run's 0). The host's indices go over in one block."""
    which = np.repeat(np.arange(len(terms)), np.diff(terms.bounds))  # each tag's run
    positions = terms.firsts[which] + np.arange(len(terms.tags)) - terms.bounds[which]
    opens = terms.bounds[:-1]  # each run's first tag
    later = np.ones(len(terms.tags), dtype=bool)
    later[opens] = False
    steps = np.flatnonzero(later)  # each tag after another in its run
    firsts = np.stack([terms.rows, terms.firsts, terms.tags[opens]])
    moves = np.stack([terms.rows[which[steps]], positions[steps] - 1, terms.tags[steps - 1],
                      terms.tags[steps], which[steps]])  # fmt: skip
    block = np.concatenate([firsts.ravel(), moves.ravel()])
    placed = to_device(torch.from_numpy(block), marginals.device)
    first_rows, first_at, first_tags = placed[: firsts.size].view(3, len(terms))
    rows, at, earlier, tags, runs = placed[firsts.size :].view(5, len(steps))
    ratio = pairs[rows, at, earlier, tags] / marginals[rows, at, earlier]
    log_chance = torch.log(marginals[first_rows, first_at, first_tags])
    return torch.exp(log_chance.index_add(0, runs, torch.log(torch.nan_to_num(ratio, nan=0.0))))
