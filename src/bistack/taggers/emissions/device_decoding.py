"""A CRF tagger's analyses computed where its emissions are: on a GPU, the best paths, each
token's marginal and each entity's probability come from the CRF's parallel scan
(``bistack.kernels.crf_scan``) on the device, and the host receives the paths, the token
confidences and the partitions, not the emissions to run forward-backward over.

The same analyses as ``TagDecoder.analyse`` (best path only) computes on the host, by the same
event math (``bistack.taggers.emissions.confidence``): the marginals are the gradient of log Z; an
entity's probability is its clamped partitions over Z, every clamped copy of the batch in one
scan. Two copies to the host a batch: the paths (the entities, and so the clamps, follow from
them), then the clamped partitions.

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

from bistack.kernels.crf_scan import log_partition_scan, viterbi_scan
from bistack.taggers.emissions.confidence import (
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
    with torch.inference_mode(False), torch.enable_grad():
        # Ordinary tensors (a prediction's are inference tensors), so the marginals can be
        # taken as log Z's gradient.
        scores = emissions[:, :width].detach().float().double()
        if decoder.temperature != 1.0:  # divided as the host divides: in float32, rounded
            scores = (scores / float(np.float32(decoder.temperature))).float().double()
        real = to_device(torch.tensor(list(lengths)), device)
        mask = torch.arange(width, device=device)[None, :] < real[:, None]  # (batch, width)
        tags, _ = viterbi_scan(scores, mask, *moves)  # (batch, width), 0 at padding
        leaf = scores.requires_grad_(True)
        log_z = log_partition_scan(leaf, mask, *moves)  # (batch,)
        (marginals,) = torch.autograd.grad(log_z.sum(), leaf)  # (batch, width, num_tags)
    token = marginals.gather(2, tags.unsqueeze(2)).squeeze(2)  # each token's marginal of its tag
    # The first read: the paths (the entities' clamps follow from them), their confidences and
    # log Z, in one block (tag ids are exact in float64).
    read = torch.cat([tags.double(), token, log_z.detach()[:, None]], dim=1).cpu().numpy()
    chosen, token_confidence = read[:, :width].astype(np.int64), read[:, width : 2 * width]
    log_z_host = read[:, 2 * width]
    paths = [chosen[row, :n].tolist() for row, n in enumerate(lengths)]
    spans, events = decoder.span_events(paths)
    terms = clamped_terms(lengths, events)
    term_log_z = np.zeros(0, dtype=np.float64)
    if len(terms):
        # -inf, not IMPOSSIBLE, where a clamp takes a tag away: a token whose every emission
        # lies far below IMPOSSIBLE (a sharp temperature, float16 training) would otherwise
        # gain paths by the clamp, and the span's probability exceed 1 by hundreds of nats.
        allowed = terms.allowed(width, scores.shape[2])
        rows = to_device(torch.from_numpy(terms.rows), device)
        with torch.no_grad():
            clamped = scores.detach()[rows].masked_fill(
                ~to_device(torch.from_numpy(allowed), device), float("-inf")
            )
            # The second read: each clamped copy's partition.
            term_log_z = log_partition_scan(clamped, mask[rows], *moves).cpu().numpy()
    chances = span_probabilities(events, terms, np.exp(term_log_z - log_z_host[terms.rows]))
    return [
        Analysis(
            path,
            token_confidence[row, : len(path)].tolist(),
            dict(zip(spans[row], chances[row], strict=True)),
        )
        for row, path in enumerate(paths)
    ]
