"""Compiled CRF recursions for CPU: best-path Viterbi, the k best paths, and the log-partition
with its gradient (the tag marginals) and the probabilities of runs of tags (an entity's
confidence), over numpy arrays.

Why compiled: both are loops over time whose steps are tiny (num_tags² additions), so in eager
PyTorch the per-operation overhead is the whole cost (and autograd doubles it for the
partition), while pytorch-crf adds a Python loop over the batch on top for decoding. One numba
kernel per batch runs the recursion in machine code (speed-ups in
``benchmarks/results/speed.md``). Torch-free, so that the PyTorch CRF (``bistack.crf``, which
wraps them as an autograd function) and a tagger's output math
(``bistack.taggers.emissions.decoding``,
which an exported model's runtime runs without torch) share them. The tensor implementations in
:mod:`bistack.crf` stay for other devices and as the reference the tests hold these to.

Arguments, everywhere: emissions ``(batch, seq_len, num_tags)`` float32 or float64; lengths
``(batch,)`` int64, each >= 1; transitions ``(num_tags, num_tags)`` [from, to]; start and end
``(num_tags,)``, in the emissions' dtype, with forbidden moves already set to a very low score.
"""

from __future__ import annotations

import numba
import numpy as np

# Score given to a forbidden move: finite, so no inf - inf turns into NaN, yet exp(IMPOSSIBLE)
# underflows to exactly 0 in float32. Gold paths never take one: ``CRF.nll`` rejects them.
IMPOSSIBLE = -1e4


def scores_as(emissions: np.ndarray, *scores: np.ndarray) -> tuple[np.ndarray, ...]:
    """``scores`` as contiguous arrays in the emissions' dtype (the kernels' arguments)."""
    return tuple(np.ascontiguousarray(s, dtype=emissions.dtype) for s in scores)


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
            # Row by row (the inner loop over contiguous memory, in SIMD); a later row takes a
            # tag only when strictly better, so ties keep the lowest index.
            for j in range(num_tags):
                new[j] = score[0] + transitions[0, j]
                back[t, j] = 0
            for i in range(1, num_tags):
                previous = score[i]
                for j in range(num_tags):
                    candidate = previous + transitions[i, j]
                    if candidate > new[j]:
                        new[j] = candidate
                        back[t, j] = i
            for j in range(num_tags):
                score[j] = new[j] + emissions[b, t, j]
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


def viterbi_best(
    emissions: np.ndarray,
    lengths: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Best paths ``(batch, seq_len)`` int64 (0 at padding) and their scores ``(batch,)``."""
    emissions = np.ascontiguousarray(emissions)
    transitions, start, end = scores_as(emissions, transitions, start, end)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    tags = np.zeros(emissions.shape[:2], dtype=np.int64)
    best = np.empty(emissions.shape[0], dtype=emissions.dtype)
    _viterbi_kernel(emissions, lengths, transitions, start, end, tags, best)
    return tags, best


def viterbi_top_k(
    emissions: np.ndarray,
    lengths: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    top_k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``top_k`` best paths ``(batch, top_k, seq_len)`` (0 at padding) and their scores
    ``(batch, top_k)`` in float64 (a long path's score sums hundreds of terms), best first;
    paths that do not exist (fewer than ``top_k``) score -inf.

    The list Viterbi of ``CRF._viterbi`` (every kept path of every tag extended by every tag,
    the best ``top_k`` kept per tag), vectorised over the batch; ties go to the lower flat index
    (tag, then rank), as a stable sort keeps them.
    """
    emissions = np.asarray(emissions, dtype=np.float64)
    batch_size, seq_len, num_tags = emissions.shape
    k = top_k
    transitions, start, end = scores_as(emissions, transitions, start, end)
    lengths = np.asarray(lengths, dtype=np.int64)
    # score[b, tag, r]: r-th best score of a path ending in tag; only rank 0 exists at t=0.
    score = np.full((batch_size, num_tags, k), -np.inf, dtype=emissions.dtype)
    score[:, :, 0] = start + emissions[:, 0]
    identity = np.broadcast_to(np.arange(num_tags * k).reshape(1, num_tags, k), score.shape)
    history = []
    for t in range(1, seq_len):
        # (batch, from, k, to) -> (batch, from * k, to): every extension of every kept path.
        candidates = (score[:, :, :, None] + transitions[None, :, None, :]).reshape(
            batch_size, num_tags * k, num_tags
        )
        index = np.argsort(-candidates, axis=1, kind="stable")[:, :k]  # (batch, k, to)
        best = np.take_along_axis(candidates, index, axis=1)
        best = best.transpose(0, 2, 1) + emissions[:, t, :, None]  # (batch, to, k)
        index = index.transpose(0, 2, 1)  # (batch, to, k), into from * k
        real = (t < lengths).reshape(batch_size, 1, 1)
        score = np.where(real, best, score)
        history.append(np.where(real, index, identity))
    final = (score + end.reshape(1, num_tags, 1)).reshape(batch_size, num_tags * k)
    flat = np.argsort(-final, axis=1, kind="stable")[:, :k]  # (batch, k)
    scores = np.take_along_axis(final, flat, axis=1)
    paths = [flat // k]
    for back in reversed(history):
        flat = np.take_along_axis(back.reshape(batch_size, -1), flat, axis=1)
        paths.append(flat // k)
    mask = np.arange(seq_len)[None, None, :] < lengths[:, None, None]
    tags = np.stack(paths[::-1], axis=2) * mask  # (batch, k, seq)
    return tags.astype(np.int64), scores


@numba.njit(cache=True, nogil=True)
def _logsumexp(values):  # pragma: no cover
    top = values.max()
    if top == -np.inf:
        return top
    return top + np.log(np.exp(values - top).sum())


@numba.njit(cache=True, nogil=True)
def _log_space_sequence(emissions, length, transitions, start, end, alpha, beta, scratch):
    # pragma: no cover
    """log Z of one sequence, its forward scores (into alpha) and backward scores (into beta),
    in log space: the fallback when scaled sums underflow to 0."""
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
def _log_space_derivatives(
    emissions, b, length, transitions, alpha, beta, total, marginals, edges
):  # pragma: no cover
    """Row ``b``'s marginals and expected transitions (where asked for: arrays of batch size)
    from its log-space forward and backward scores."""
    num_tags = emissions.shape[2]
    if marginals.shape[0]:
        for t in range(length):
            for j in range(num_tags):
                marginals[b, t, j] = np.exp(alpha[t, j] + beta[t, j] - total)
    if edges.shape[0]:
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


@numba.njit(cache=True, nogil=True)
def _scaled_forward(emissions, length, moves, starts, ends, top_transition, emitted, alpha, scale):
    # pragma: no cover
    """One sequence's forward scores ``emissions`` ``(seq_len, num_tags)`` in probability space:
    ``emitted`` = exp(emission - its position's top), ``alpha[t]`` rescaled to sum 1 by
    ``scale[t]``. Returns ``(log_total, finish)``: log Z is ``log_total + log(finish)`` plus the
    start and end scores' tops; ``finish`` is 0 where the scaled sums underflow (redo in log
    space)."""
    num_tags = emissions.shape[1]
    log_total = 0.0
    for t in range(length):
        top = emissions[t].max()
        log_total += top + (top_transition if t else 0.0)
        for j in range(num_tags):
            emitted[t, j] = np.exp(emissions[t, j] - top)
    for j in range(num_tags):
        alpha[0, j] = starts[j] * emitted[0, j]
    for t in range(length):
        if t:  # row by row, so the inner loop runs over contiguous memory in SIMD
            alpha[t] = 0.0
            for i in range(num_tags):
                previous = alpha[t - 1, i]
                for j in range(num_tags):
                    alpha[t, j] += previous * moves[i, j]
            for j in range(num_tags):
                alpha[t, j] *= emitted[t, j]
        scale[t] = alpha[t].sum()
        if not scale[t] > 0.0:
            return log_total, 0.0
        alpha[t] /= scale[t]
        log_total += np.log(scale[t])
    finish = 0.0
    for j in range(num_tags):
        finish += alpha[length - 1, j] * ends[j]
    return log_total, finish


@numba.njit(cache=True, nogil=True)
def _scaled_backward(
    length, moves_to, ends, finish, emitted, scale, beta, scratch
):  # pragma: no cover
    """Scaled backward scores into ``beta``: ``alpha[t, j] * beta[t, j]`` is the marginal of
    tag j at t; ``moves_to`` the moves transposed, (to, from)."""
    num_tags = moves_to.shape[0]
    for j in range(num_tags):
        beta[length - 1, j] = ends[j] / finish
    for t in range(length - 2, -1, -1):
        for j in range(num_tags):
            scratch[j] = emitted[t + 1, j] * beta[t + 1, j] / scale[t + 1]
        beta[t] = 0.0
        for j in range(num_tags):  # row by row over moves_to (to, from), as in the forward
            following = scratch[j]
            for i in range(num_tags):
                beta[t, i] += moves_to[j, i] * following


@numba.njit(cache=True, nogil=True)
def _scaled_derivatives(
    b, length, moves, emitted, scale, alpha, beta, scratch, marginals, edges
):  # pragma: no cover
    """Row ``b``'s marginals and expected transitions (where asked for) from its scaled
    scores."""
    num_tags = moves.shape[0]
    if marginals.shape[0]:
        for t in range(length):
            for j in range(num_tags):
                marginals[b, t, j] = alpha[t, j] * beta[t, j]
    if edges.shape[0]:
        for t in range(1, length):
            for j in range(num_tags):
                scratch[j] = emitted[t, j] * beta[t, j] / scale[t]
            for i in range(num_tags):
                for j in range(num_tags):
                    edges[b, i, j] += alpha[t - 1, i] * moves[i, j] * scratch[j]


@numba.njit(cache=True, nogil=True)
def _scaled_run(first, tags, moves, emitted, scale, alpha, beta):  # pragma: no cover
    """P(``tags`` from position ``first`` on) from scaled scores: the forward score at the run's
    first tag, the chain's moves and emissions along it, the backward score at its last. The
    partial forward score of the run's paths never exceeds the whole's, so nothing overflows."""
    value = alpha[first, tags[0]]
    for k in range(1, len(tags)):
        t = first + k
        value *= moves[tags[k - 1], tags[k]] * emitted[t, tags[k]] / scale[t]
    return value * beta[first + len(tags) - 1, tags[-1]]


@numba.njit(cache=True, nogil=True)
def _log_space_run(first, tags, transitions, emissions, alpha, beta, log_z):  # pragma: no cover
    """:func:`_scaled_run` from log-space scores: one sequence's ``emissions``, its ``log_z``."""
    value = alpha[first, tags[0]] - log_z
    for k in range(1, len(tags)):
        value += transitions[tags[k - 1], tags[k]] + emissions[first + k, tags[k]]
    return np.exp(value + beta[first + len(tags) - 1, tags[-1]])


@numba.njit(cache=True, nogil=True)
def _partition_kernel(
    emissions, lengths, transitions, start, end, log_z, marginals, edges, runs, probabilities
):  # pragma: no cover
    """Fill ``log_z`` ``(batch,)`` and what else is asked for (arrays of size 0 are not):
    ``marginals`` ``(batch, seq_len, num_tags)`` (the derivatives of log Z: tag marginals, 0 at
    padding, also the start/end derivatives at the first/last position), ``edges``
    ``(batch, from, to)`` (expected transition counts), and ``probabilities`` ``(runs,)`` of
    the runs of tags ``runs`` lays out (:func:`marginals_and_runs`).

    The forward-backward recursions run in probability space, rescaled to sum 1 at every step
    (Rabiner 1989), in float64: num_tags² multiply-adds per step instead of num_tags²
    exponentials. A sequence whose scaled sums underflow (only possible when nearly every path
    is forbidden) is redone in log space.
    """
    row_runs, firsts, bounds, tags = runs
    batch_size, seq_len, num_tags = emissions.shape
    top_transition = transitions.max()
    moves = np.exp(transitions - top_transition)  # (from, to)
    moves_to = np.ascontiguousarray(moves.T)
    top_start, top_end = start.max(), end.max()
    starts, ends = np.exp(start - top_start), np.exp(end - top_end)
    alpha = np.empty((seq_len, num_tags))
    beta = np.empty((seq_len, num_tags))
    emitted = np.empty((seq_len, num_tags))
    scale = np.empty(seq_len)
    scratch = np.empty(num_tags)
    for b in range(batch_size):
        length = lengths[b]
        log_total, finish = _scaled_forward(
            emissions[b], length, moves, starts, ends, top_transition, emitted, alpha, scale
        )
        scaled = finish > 0.0
        if scaled:
            log_z[b] = log_total + top_start + np.log(finish) + top_end
        else:
            log_z[b] = _log_space_sequence(
                emissions[b], length, transitions, start, end, alpha, beta, scratch
            )
        if not (marginals.shape[0] or edges.shape[0] or row_runs[b + 1] > row_runs[b]):
            continue
        if scaled:
            _scaled_backward(length, moves_to, ends, finish, emitted, scale, beta, scratch)
            _scaled_derivatives(
                b, length, moves, emitted, scale, alpha, beta, scratch, marginals, edges
            )
        else:
            _log_space_derivatives(
                emissions, b, length, transitions, alpha, beta, log_z[b], marginals, edges
            )
        for r in range(row_runs[b], row_runs[b + 1]):
            run = tags[bounds[r] : bounds[r + 1]]
            if scaled:
                probabilities[r] = _scaled_run(firsts[r], run, moves, emitted, scale, alpha, beta)
            else:
                probabilities[r] = _log_space_run(
                    firsts[r], run, transitions, emissions[b], alpha, beta, log_z[b]
                )


def log_partition(
    emissions: np.ndarray,
    lengths: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    with_grad: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log Z ``(batch,)`` in float64 (the recursions run in float64: a long sentence's log Z is
    in the hundreds, where float32 keeps only about 5 digits); with ``with_grad``, also its
    derivatives:
    the tag marginals ``(batch, seq_len, num_tags)`` (0 at padding) and the expected transition
    counts ``(batch, num_tags, num_tags)`` (empty arrays without)."""
    batch_size, seq_len, num_tags = emissions.shape
    none = np.zeros(0, np.int64)
    no_runs = (np.zeros(batch_size + 1, np.int64), none, np.zeros(1, np.int64), none)
    log_z, marginals, edges, _ = _partition(
        emissions,
        lengths,
        (transitions, start, end),
        (batch_size, seq_len, num_tags) if with_grad else (0, 0, 0),
        (batch_size, num_tags, num_tags) if with_grad else (0, 0, 0),
        no_runs,
    )
    return log_z, marginals, edges


def marginals_and_runs(
    emissions: np.ndarray,
    lengths: np.ndarray,
    transitions: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    runs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The tag marginals ``(batch, seq_len, num_tags)`` (0 at padding) and the probability
    ``(runs,)`` float64 of each run of tags in ``runs`` = ``(rows, firsts, bounds, tags)``, int64:
    run r, of row ``rows[r]`` (rows in order), holds tags ``tags[bounds[r]:bounds[r + 1]]`` from
    position ``firsts[r]`` on. One forward-backward pass: a run's probability is the forward
    score at its first tag, the chain along it and the backward score at its last, O(its
    length), where a partition of a clamped copy would cost O(sentence length x num_tags²)."""
    rows, firsts, bounds, tags = (np.ascontiguousarray(a, dtype=np.int64) for a in runs)
    sizes = np.diff(bounds)
    if len(bounds) != len(rows) + 1 or len(firsts) != len(rows) or bounds[-1] != len(tags):
        raise ValueError("runs: rows and firsts need one entry a run, bounds one more")
    if len(rows) and (
        np.any(np.diff(rows) < 0)
        or rows[0] < 0
        or rows[-1] >= emissions.shape[0]
        or sizes.min() < 1
        or firsts.min() < 0
        or np.any(firsts + sizes > np.asarray(lengths)[rows])
        or tags.min() < 0
        or tags.max() >= emissions.shape[2]
    ):
        raise ValueError("runs: each must hold known tags within its row's length, rows in order")
    row_runs = np.searchsorted(rows, np.arange(emissions.shape[0] + 1)).astype(np.int64)
    _, marginals, _, probabilities = _partition(
        emissions,
        lengths,
        (transitions, start, end),
        emissions.shape,
        (0, 0, 0),
        (row_runs, firsts, bounds, tags),
    )
    return marginals, probabilities


def _partition(
    emissions: np.ndarray,
    lengths: np.ndarray,
    scores: tuple[np.ndarray, np.ndarray, np.ndarray],
    marginals_shape: tuple[int, ...],
    edges_shape: tuple[int, ...],
    runs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_partition_kernel`'s arrays made and filled: log Z, marginals, edges (each shape
    empty where not wanted) and the runs' probabilities."""
    emissions = np.ascontiguousarray(emissions)
    transitions, start, end = scores_as(emissions, *scores)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    marginals = np.zeros(marginals_shape, dtype=emissions.dtype)
    edges = np.zeros(edges_shape, dtype=emissions.dtype)
    log_z = np.empty(emissions.shape[0], dtype=np.float64)
    probabilities = np.zeros(len(runs[1]), dtype=np.float64)
    _partition_kernel(
        emissions, lengths, transitions, start, end, log_z, marginals, edges, runs, probabilities
    )
    return log_z, marginals, edges, probabilities
