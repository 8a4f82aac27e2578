"""The CRF's log-partition and best path in O(log T) sequential steps: a parallel scan.

A linear chain's score is a product of per-position matrices in a semiring: with
``M_t[i, j] = transitions[i, j] + emissions[t, j]`` (from tag i at t - 1 to tag j at t),
``log Z = logsumexp(start + emissions[0] + M_1 ⊗ M_2 ⊗ ... ⊗ M_{T-1} + end)`` in the log
semiring (⊗: logsumexp over the shared index), and the best path's score is the same product in
the max-plus semiring. Products are associative, so they are taken pairwise, a level at a time:
``ceil(log2(T))`` levels of whole-batch tensor operations instead of T steps of small ones, as
harvardnlp's pytorch-struct runs its linear chain. On a GPU a Python loop over positions
launches a few kernels per position and waits on none of them usefully; this launches a few per
level.

Gradients come from autograd through the levels: the gradient of log Z is the tag marginals, and
the gradient of the max-plus score with respect to the emissions is the best path itself (each
max passes its gradient to the one term it chose, so the chosen terms form one valid path).
Padding positions multiply by the identity, so a sequence's product stops at its own length.

Work is ``batch × T × num_tags³`` (each product forms every from-middle-to triple), which suits
a GPU's width; on the CPU the compiled kernels (``bistack.kernels.crf_compiled``) stay faster.
Memory is not: formed whole, a level's triples take ``batch × T/2 × num_tags³`` numbers (about
20 GB in float64 at batch 256, 40 positions and OntoNotes' 73 BIOES tags), and autograd would
keep them for the gradient. So each level forms them a block of products at a time in one
workspace that every level of a scan shares (at most ``BLOCK_NUMBERS`` numbers), each step in
place, and the log semiring's product is a function of its own whose gradient forms them again,
a block at a time in the same workspace, from its inputs and output (``num_tags²`` each): at 73
tags a training step's scan allocates 0.06-0.07x the bytes of products formed whole, a decoded
batch's 0.15-0.21x (16 sentences of 24 or 12 positions: the fewer products, the larger the
share; ``tests/test_crf.py`` measures them with the profiler).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from bistack.kernels.crf_compiled import IMPOSSIBLE


def log_partition_scan(
    emissions: Tensor, mask: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> Tensor:
    """log Z ``(batch,)`` of emissions ``(batch, seq_len, num_tags)``, mask ``(batch, seq_len)``
    True at real positions (right-padded, at least one each), transitions ``(from, to)``, start
    and end ``(num_tags,)`` (forbidden moves already IMPOSSIBLE). Differentiable."""
    emissions, transitions, start, end = in_float32_or_wider(emissions, transitions, start, end)
    first = start + emissions[:, 0]  # (batch, num_tags)
    if emissions.size(1) == 1:
        return torch.logsumexp(first + end, dim=1)
    return _closed(first, _reduce(_step_matrices(emissions, mask, transitions), _log_matmul), end)


def _closed(first: Tensor, product: Tensor, end: Tensor) -> Tensor:
    """log Z ``(batch,)`` from the first position's scores ``(batch, K)``, the product of the
    moves after it ``(batch, K, K)`` and the end scores ``(K,)``."""
    # (batch, from, 1) + (batch, from, to) + (1, 1, to) -> logsumexp over both
    return torch.logsumexp((first.unsqueeze(2) + product + end.view(1, 1, -1)).flatten(1), dim=1)


def posterior_scan(
    emissions: Tensor, mask: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> tuple[Tensor, Tensor]:
    """Each position's tag marginals ``(batch, seq_len, num_tags)`` (0 at
    padding) and each move's ``(batch, seq_len - 1, from, to)`` (into position t + 1; at
    padding, the identity's), from one pass of the scan and its backward: the gradients of log
    Z with respect to the first position's scores and to each step matrix. Arguments as
    :func:`log_partition_scan`; works under ``torch.no_grad`` and inference mode. A run of tags
    has the probability of its first tag times each move's over its tag before (the posterior is
    a Markov chain), so every entity of a batch is scored from these, with no partition more."""
    emissions, transitions, start, end = in_float32_or_wider(emissions, transitions, start, end)
    with torch.inference_mode(False), torch.enable_grad():
        # Copies made here are ordinary tensors even when the inputs are inference tensors.
        first = (start + emissions[:, 0]).detach().clone().requires_grad_(True)
        steps = _step_matrices(emissions, mask, transitions).detach().clone()
        steps.requires_grad_(True)
        if emissions.size(1) == 1:
            log_z = torch.logsumexp(first + end, dim=1)
        else:
            log_z = _closed(first, _reduce(steps, _log_matmul), end)
        first_marginals, moves = torch.autograd.grad(log_z.sum(), (first, steps), allow_unused=True)
    if moves is None:  # one position: no moves
        moves = torch.zeros_like(steps)
    marginals = torch.cat([first_marginals.unsqueeze(1), moves.sum(dim=2)], dim=1)
    return marginals * mask.unsqueeze(2), moves


def viterbi_scan(
    emissions: Tensor, mask: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> tuple[Tensor, Tensor]:
    """The best path ``(batch, seq_len)`` long (0 at padding) and its score ``(batch,)``, with
    arguments as :func:`log_partition_scan`. Works under ``torch.no_grad`` and inference mode:
    the path is read from a gradient taken on a copy of the scores."""
    with torch.inference_mode(False), torch.enable_grad():
        # Copies made here are ordinary tensors even when the inputs are inference tensors.
        scores = emissions.detach().clone().requires_grad_(True)  # the leaf the path is read from
        mask = mask.clone()
        promoted, transitions, start, end = in_float32_or_wider(
            scores, *(tensor.detach().clone() for tensor in (transitions, start, end))
        )
        first = start + promoted[:, 0]
        if promoted.size(1) == 1:
            total = first + end  # (batch, num_tags)
        else:
            product = _reduce(_step_matrices(promoted, mask, transitions), _max_matmul)
            total = (first.unsqueeze(2) + product + end.view(1, 1, -1)).flatten(1)
        best, _ = total.max(dim=1)  # (batch,)
        (chosen,) = torch.autograd.grad(best.sum(), scores)
    tags = chosen.argmax(dim=2) * mask  # one-hot per real position -> its tag
    return tags, best.detach().to(emissions.dtype)


def in_float32_or_wider(*tensors: Tensor) -> list[Tensor]:
    """The scores in float32 at least: bf16 or fp16 sums of IMPOSSIBLE would lose every
    digit the scores differ in (mixed precision runs the CRF in float32)."""
    dtype = torch.promote_types(tensors[0].dtype, torch.float32)
    return [tensor.to(dtype) for tensor in tensors]


def _step_matrices(emissions: Tensor, mask: Tensor, transitions: Tensor) -> Tensor:
    """``(batch, seq_len - 1, from, to)``: the move into each position, the semiring's identity
    (0 on the diagonal, IMPOSSIBLE elsewhere) at padding."""
    num_tags = emissions.size(2)
    moves = transitions + emissions[:, 1:].unsqueeze(2)  # (batch, seq - 1, 1 -> from, to)
    identity = torch.full((num_tags, num_tags), IMPOSSIBLE, dtype=moves.dtype, device=moves.device)
    identity.fill_diagonal_(0.0)
    return torch.where(mask[:, 1:, None, None], moves, identity)


def _reduce(matrices: Tensor, multiply) -> Tensor:
    """The ordered product ``M_1 ⊗ ... ⊗ M_n`` of ``(batch, n, K, K)``, pairwise, in
    ``ceil(log2(n))`` levels -> ``(batch, K, K)``; every level's triples formed in one
    workspace (:func:`_workspace`)."""
    workspace = _workspace(matrices)
    while matrices.size(1) > 1:
        if matrices.size(1) % 2:  # an odd one out waits a level, times the identity
            identity = torch.full_like(matrices[:, :1], IMPOSSIBLE)
            identity.diagonal(dim1=2, dim2=3).fill_(0.0)
            matrices = torch.cat([matrices, identity], dim=1)
        matrices = multiply(matrices[:, 0::2], matrices[:, 1::2], workspace)
    return matrices[:, 0]


# The most numbers a block of a level's (product, from, middle, to) triples holds (64 MB in
# float32): a level forms its triples a block of products at a time, every level of a scan (and
# the log semiring's backward) in one workspace, each step in place. Formed whole, a level's
# triples would take ``batch × T/2 × K³`` numbers a temporary (20 GB in float64 at batch 256,
# 40 positions and OntoNotes' 73 BIOES tags), several temporaries a product.
BLOCK_NUMBERS = 2**24


def _workspace(matrices: Tensor) -> Tensor:
    """``(block, K, K, K)``: room for the triples of as many of the first level's products
    ``(batch, n, K, K)`` as fit in ``BLOCK_NUMBERS`` (the later levels have fewer)."""
    batch, count, size, _ = matrices.shape
    block = max(1, min(BLOCK_NUMBERS // size**3, batch * (count // 2)))
    return matrices.new_empty((block, size, size, size))


class _Blocks:
    """``tensors`` ``(..., K, K)`` flattened to ``(products, K, K)`` and cut alike into blocks
    of as many products as ``workspace`` holds the triples of, each with its part of it."""

    def __init__(self, workspace: Tensor, *tensors: Tensor) -> None:
        size = tensors[0].size(-1)
        self.flat = [tensor.reshape(-1, size, size) for tensor in tensors]
        self.workspace = workspace

    def __iter__(self) -> Iterator[tuple[Tensor, tuple[Tensor, ...]]]:
        step = self.workspace.size(0)
        for parts in zip(*(tensor.split(step) for tensor in self.flat), strict=True):
            yield self.workspace[: parts[0].size(0)], parts

    @staticmethod
    def triples(room: Tensor, left: Tensor, right: Tensor) -> Tensor:
        """``left[n, i, k] + right[n, k, j]`` into ``room`` ``(n, i, k, j)``."""
        return torch.add(left.unsqueeze(-1), right.unsqueeze(-3), out=room)


class _LogMatmul(torch.autograd.Function):
    """``(..., i, k) ⊗ (..., k, j)`` in the log semiring (logsumexp over k), its triples formed
    a block at a time in one buffer going forward and again going back (the gradient of a
    logsumexp is the softmax of its terms: ``exp(left[i, k] + right[k, j] - out[i, j])``),
    each in place, so that only the inputs and the output, ``K²`` a product, are kept and a
    level allocates one block's triples, not each product's several times over."""

    @staticmethod
    def forward(ctx: Any, left: Tensor, right: Tensor, workspace: Tensor) -> Tensor:
        blocks = _Blocks(workspace, left, right)
        parts = []
        for buffer, (a, b) in blocks:
            terms = blocks.triples(buffer, a, b)  # (n, i, k, j)
            peak = terms.amax(dim=-2, keepdim=True)  # (n, i, 1, j)
            peak.nan_to_num_(neginf=0.0)  # all -inf: stays -inf below
            summed = terms.sub_(peak).exp_().sum(dim=-2)  # (n, i, j)
            parts.append(summed.log_().add_(peak.squeeze(-2)))
        out = torch.cat(parts).view(left.shape)
        ctx.save_for_backward(left, right, out)
        ctx.workspace = workspace  # written again going back: not a saved (checked) tensor
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        left, right, out = ctx.saved_tensors
        blocks = _Blocks(ctx.workspace, left, right, out, grad)
        into_left, into_right = [], []
        for buffer, (a, b, total, g) in blocks:
            total = total.nan_to_num(neginf=0.0)  # all -inf: every share 0
            share = blocks.triples(buffer, a, b).sub_(total.unsqueeze(-2)).exp_()
            weighted = share.mul_(g.unsqueeze(-2))  # (n, i, k, j)
            into_left.append(weighted.sum(-1))
            into_right.append(weighted.sum(-3))
        into = torch.cat(into_left).view(left.shape), torch.cat(into_right).view(right.shape)
        return *into, None


def _log_matmul(left: Tensor, right: Tensor, workspace: Tensor) -> Tensor:
    """``(..., i, k) ⊗ (..., k, j)`` in the log semiring: logsumexp over k."""
    return _LogMatmul.apply(left, right, workspace)


class _MaxMatmul(torch.autograd.Function):
    """``(..., i, k) ⊗ (..., k, j)`` in the max-plus semiring (max over k), its triples formed a
    block at a time in one buffer; each max's choice is kept (``K²`` a product), and the
    gradient goes whole to the one term it chose, so that the chosen terms form one path."""

    @staticmethod
    def forward(ctx: Any, left: Tensor, right: Tensor, workspace: Tensor) -> Tensor:
        blocks = _Blocks(workspace, left, right)
        values, choices = [], []
        for buffer, (a, b) in blocks:
            best = blocks.triples(buffer, a, b).max(dim=-2)
            values.append(best.values)
            choices.append(best.indices)
        chosen = torch.cat(choices).view(left.shape)  # (..., i, j): the k each max took
        ctx.save_for_backward(chosen)
        return torch.cat(values).view(left.shape)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, None]:
        (chosen,) = ctx.saved_tensors
        into_left = torch.zeros_like(grad).scatter_add_(-1, chosen, grad)  # [i, k*] += g[i, j]
        into_right = torch.zeros_like(grad).scatter_add_(-2, chosen, grad)  # [k*, j] += g[i, j]
        return into_left, into_right, None


def _max_matmul(left: Tensor, right: Tensor, workspace: Tensor) -> Tensor:
    """``(..., i, k) ⊗ (..., k, j)`` in the max-plus semiring: max over k."""
    return _MaxMatmul.apply(left, right, workspace)
