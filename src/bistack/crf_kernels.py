"""Compiled CRF recursions for CPU: best-path Viterbi, and the log-partition with its gradient.

Why compiled: both are loops over time whose steps are tiny (num_tags² additions), so in eager
PyTorch the per-operation overhead is the whole cost (and autograd doubles it for the
partition), while pytorch-crf adds a Python loop over the batch on top for decoding. One numba
kernel per batch runs the recursion in machine code (speed-ups in
``benchmarks/results/speed.md``). The tensor implementations in :mod:`bistack.crf` stay for
other devices, for ``top_k > 1`` and as the reference the tests hold these kernels to.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable


def runs_compiled(emissions: Tensor) -> bool:
    """Whether these kernels take ``emissions``: float32/float64 on CPU."""
    return emissions.device.type == "cpu" and emissions.dtype in (torch.float32, torch.float64)


def kernel_inputs(
    emissions: Tensor, lengths: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> tuple[np.ndarray, ...]:
    """The kernels' arguments as contiguous arrays: scores in the emissions' dtype, lengths
    int64 (the arrays share memory with the tensors where no conversion is needed)."""

    def scores(tensor: Tensor) -> np.ndarray:
        return tensor.detach().to(emissions.dtype).contiguous().numpy()

    lengths_array = lengths.detach().to(torch.int64).contiguous().numpy()
    return (
        scores(emissions),
        lengths_array,
        scores(transitions),
        scores(start),
        scores(end),
    )


@numba.njit(cache=True, nogil=True)
def _viterbi_kernel(emissions, lengths, transitions, start, end, tags, best):  # pragma: no cover
    """Fill ``tags`` ``(batch, seq_len)`` (left 0 at padding) and ``best`` ``(batch,)``.

    Ties go to the lowest tag index, as ``torch.max`` does, so both implementations agree.
    """
    batch_size, _, num_tags = emissions.shape
    score = np.empty(num_tags, dtype=emissions.dtype)
    new = np.empty(num_tags, dtype=emissions.dtype)
    back = np.empty((emissions.shape[1], num_tags), dtype=np.int64)
    for b in range(batch_size):
        length = lengths[b]
        for j in range(num_tags):
            score[j] = start[j] + emissions[b, 0, j]
        for t in range(1, length):
            for j in range(num_tags):
                arg = 0
                top = score[0] + transitions[0, j]
                for i in range(1, num_tags):
                    candidate = score[i] + transitions[i, j]
                    if candidate > top:
                        top = candidate
                        arg = i
                new[j] = top + emissions[b, t, j]
                back[t, j] = arg
            score[:] = new
        arg = 0
        top = score[0] + end[0]
        for j in range(1, num_tags):
            if score[j] + end[j] > top:
                top = score[j] + end[j]
                arg = j
        best[b] = top
        tags[b, length - 1] = arg
        for t in range(length - 1, 0, -1):
            arg = back[t, arg]
            tags[b, t - 1] = arg


def viterbi_best_cpu(
    emissions: Tensor, lengths: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> tuple[Tensor, Tensor]:
    """Best paths ``(batch, seq_len)`` long (0 at padding) and their scores ``(batch,)``.

    emissions ``(batch, seq_len, num_tags)`` float on CPU; lengths ``(batch,)``, each >= 1;
    transitions ``(num_tags, num_tags)`` [from, to]; start and end ``(num_tags,)``, all with
    forbidden moves already set to a very low score.
    """
    arrays = kernel_inputs(emissions, lengths, transitions, start, end)
    tags = np.zeros(emissions.shape[:2], dtype=np.int64)
    best = np.empty(emissions.size(0), dtype=arrays[0].dtype)
    _viterbi_kernel(*arrays, tags, best)
    return torch.from_numpy(tags), torch.from_numpy(best)


@numba.njit(cache=True, nogil=True)
def _logsumexp(values):  # pragma: no cover
    top = values.max()
    if top == -np.inf:
        return top
    return top + np.log(np.exp(values - top).sum())


@numba.njit(cache=True, nogil=True)
def _log_space_sequence(emissions, length, transitions, start, end, alpha, beta, scratch):
    # pragma: no cover
    """log Z of one sequence, and its tag marginals p (into alpha) and normalised backward
    scores (into beta), in log space: the fallback when scaled sums underflow to 0."""
    num_tags = emissions.shape[1]
    for j in range(num_tags):
        alpha[0, j] = start[j] + emissions[0, j]
    for t in range(1, length):
        for j in range(num_tags):
            for i in range(num_tags):
                scratch[i] = alpha[t - 1, i] + transitions[i, j]
            alpha[t, j] = _logsumexp(scratch) + emissions[t, j]
    for j in range(num_tags):
        scratch[j] = alpha[length - 1, j] + end[j]
    total = _logsumexp(scratch)
    for j in range(num_tags):
        beta[length - 1, j] = end[j]
    for t in range(length - 2, -1, -1):
        for i in range(num_tags):
            for j in range(num_tags):
                scratch[j] = transitions[i, j] + emissions[t + 1, j] + beta[t + 1, j]
            beta[t, i] = _logsumexp(scratch)
    return total


@numba.njit(cache=True, nogil=True)
def _partition_kernel(
    emissions, lengths, transitions, start, end, log_z, marginals, edges, with_grad
):  # pragma: no cover
    """Fill ``log_z`` ``(batch,)``; with ``with_grad``, also the derivatives of each log Z:
    ``marginals`` ``(batch, seq_len, num_tags)`` (tag marginals, 0 at padding; also the
    start/end derivatives at the first/last position) and ``edges`` ``(batch, from, to)``
    (expected transition counts).

    The forward-backward recursions run in probability space, rescaled to sum 1 at every step
    (Rabiner 1989), in float64: num_tags² multiply-adds per step instead of num_tags²
    exponentials. A sequence whose scaled sums underflow (only possible when nearly every path
    is forbidden) is redone in log space.
    """
    batch_size, seq_len, num_tags = emissions.shape
    top_transition = transitions.max()
    moves = np.exp(transitions - top_transition)  # (from, to)
    top_start, top_end = start.max(), end.max()
    starts, ends = np.exp(start - top_start), np.exp(end - top_end)
    alpha = np.empty((seq_len, num_tags))
    beta = np.empty((seq_len, num_tags))
    emitted = np.empty((seq_len, num_tags))
    scale = np.empty(seq_len)
    scratch = np.empty(num_tags)
    for b in range(batch_size):
        length = lengths[b]
        log_total = top_start  # log Z = log_total + log(finish) + top_end, once complete
        for t in range(length):
            top = emissions[b, t].max()
            log_total += top + (top_transition if t else 0.0)
            for j in range(num_tags):
                emitted[t, j] = np.exp(emissions[b, t, j] - top)
        for j in range(num_tags):
            alpha[0, j] = starts[j] * emitted[0, j]
        ok = True
        for t in range(length):
            if t:
                for j in range(num_tags):
                    total = 0.0
                    for i in range(num_tags):
                        total += alpha[t - 1, i] * moves[i, j]
                    alpha[t, j] = total * emitted[t, j]
            scale[t] = alpha[t].sum()
            if not scale[t] > 0.0:
                ok = False
                break
            alpha[t] /= scale[t]
            log_total += np.log(scale[t])
        finish = 0.0
        if ok:
            for j in range(num_tags):
                finish += alpha[length - 1, j] * ends[j]
            ok = finish > 0.0
        if not ok:
            log_z[b] = _log_space_sequence(
                emissions[b], length, transitions, start, end, alpha, beta, scratch
            )
            if with_grad:
                total = log_z[b]
                for t in range(length):
                    for j in range(num_tags):
                        marginals[b, t, j] = np.exp(alpha[t, j] + beta[t, j] - total)
                for t in range(1, length):
                    for i in range(num_tags):
                        for j in range(num_tags):
                            edges[b, i, j] += np.exp(
                                alpha[t - 1, i]
                                + transitions[i, j]
                                + emissions[b, t, j]
                                + beta[t, j]
                                - total
                            )
            continue
        log_z[b] = log_total + np.log(finish) + top_end
        if not with_grad:
            continue
        # Scaled backward scores: alpha[t, j] * beta[t, j] is the marginal of tag j at t.
        for j in range(num_tags):
            beta[length - 1, j] = ends[j] / finish
        for t in range(length - 2, -1, -1):
            for j in range(num_tags):
                scratch[j] = emitted[t + 1, j] * beta[t + 1, j] / scale[t + 1]
            for i in range(num_tags):
                total = 0.0
                for j in range(num_tags):
                    total += moves[i, j] * scratch[j]
                beta[t, i] = total
        for t in range(length):
            for j in range(num_tags):
                marginals[b, t, j] = alpha[t, j] * beta[t, j]
        for t in range(1, length):
            for j in range(num_tags):
                scratch[j] = emitted[t, j] * beta[t, j] / scale[t]
            for i in range(num_tags):
                for j in range(num_tags):
                    edges[b, i, j] += alpha[t - 1, i] * moves[i, j] * scratch[j]


class LogPartitionCPU(torch.autograd.Function):
    """log Z per sequence ``(batch,)`` with its exact gradient, from the compiled kernel.

    Inputs as :func:`viterbi_best_cpu`. The gradient of log Z is the expected feature count:
    tag marginals for the emissions (and start/end at each sequence's ends), expected
    transition counts for the transitions.
    """

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        emissions: Tensor,
        lengths: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
    ) -> Tensor:
        with_grad = any(ctx.needs_input_grad)
        arrays = kernel_inputs(emissions, lengths, transitions, start, end)
        batch_size, seq_len, num_tags = emissions.shape
        shape = (batch_size, seq_len, num_tags) if with_grad else (0, 0, 0)
        marginals = np.zeros(shape, dtype=arrays[0].dtype)
        edges = np.zeros(
            (batch_size, num_tags, num_tags) if with_grad else (0, 0, 0), marginals.dtype
        )
        log_z = np.empty(batch_size, dtype=marginals.dtype)
        _partition_kernel(*arrays, log_z, marginals, edges, with_grad)
        if with_grad:
            ctx.save_for_backward(torch.from_numpy(marginals), torch.from_numpy(edges), lengths)
            ctx.dtypes = (emissions.dtype, transitions.dtype, start.dtype, end.dtype)
        return torch.from_numpy(log_z)

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_log_z: Tensor):
        marginals, edges, lengths = ctx.saved_tensors
        weight = grad_log_z.to(marginals.dtype)
        rows = torch.arange(marginals.size(0))
        grad_emissions = marginals * weight.view(-1, 1, 1)
        grad_transitions = torch.einsum("b,bij->ij", weight, edges)
        grad_start = grad_emissions[:, 0].sum(dim=0)
        grad_end = grad_emissions[rows, lengths - 1].sum(dim=0)
        emissions, transitions, start, end = ctx.dtypes
        return (
            grad_emissions.to(emissions),
            None,
            grad_transitions.to(transitions),
            grad_start.to(start),
            grad_end.to(end),
        )
