"""Linear-chain conditional random field with scheme constraints.

Lafferty et al. 2001; as a tagging head over a BiLSTM, Huang et al. 2015 and Lample et al. 2016.
Transitions are indexed ``[from, to]``. Constraints from :func:`bistack.schemes.allowed_transitions`
are applied in the normaliser as well as in decoding, so training puts no probability mass on
paths that decoding can never emit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from bistack.kernels.crf_choice import takes_loop
from bistack.kernels.crf_compiled import IMPOSSIBLE, log_partition, viterbi_best
from bistack.kernels.crf_loop import log_partition_loop
from bistack.kernels.crf_scan import in_float32_or_wider, log_partition_scan, viterbi_scan
from bistack.masking import check_mask
from bistack.schemes import AllowedTransitions

Reduction = Literal["mean", "sum", "none", "token_mean"]


@dataclass(frozen=True)
class CRFDecoding:
    """Viterbi output, the same type whatever ``top_k``.

    tags: ``(batch_size, top_k, seq_len)`` long, 0 at padding; scores: ``(batch_size, top_k)``
    path scores, best first; lengths: ``(batch_size,)``.
    """

    tags: Tensor
    scores: Tensor
    lengths: Tensor

    @property
    def best(self) -> Tensor:
        """The best path per sequence: ``(batch_size, seq_len)``."""
        return self.tags[:, 0]

    def to_lists(self, rank: int = 0) -> list[list[int]]:
        """The ``rank``-th best path of each sequence, cut to its length."""
        return [
            row[:length].tolist()
            for row, length in zip(self.tags[:, rank], self.lengths.tolist(), strict=True)
        ]


class CRF(nn.Module):
    """A linear-chain CRF over ``num_tags`` tags.

    ``allowed`` (optional) forbids transitions, starts and ends; the masks are buffers, so they
    move with the module and are saved with it, and are never trained. ``names`` (optional)
    are the tags' labels, used in error messages.
    """

    transitions_ok: Tensor  # (num_tags, num_tags) bool buffers: what ``allowed`` permits
    start_ok: Tensor  # (num_tags,)
    end_ok: Tensor  # (num_tags,)
    forbidden: Tensor  # (num_tags + 2, num_tags) bool, not saved: made from the three above

    def __init__(
        self,
        num_tags: int,
        allowed: AllowedTransitions | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"invalid number of tags: {num_tags}")
        self.num_tags = num_tags
        self.names = list(names) if names is not None else [str(i) for i in range(num_tags)]
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))  # [from, to]
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        nn.init.uniform_(self.transitions, -0.1, 0.1)
        nn.init.uniform_(self.start_transitions, -0.1, 0.1)
        nn.init.uniform_(self.end_transitions, -0.1, 0.1)
        transitions_ok = torch.ones(num_tags, num_tags, dtype=torch.bool)
        start_ok = torch.ones(num_tags, dtype=torch.bool)
        end_ok = torch.ones(num_tags, dtype=torch.bool)
        if allowed is not None:
            transitions_ok = torch.tensor(allowed.transitions, dtype=torch.bool)
            start_ok = torch.tensor(allowed.start, dtype=torch.bool)
            end_ok = torch.tensor(allowed.end, dtype=torch.bool)
            if transitions_ok.shape != (num_tags, num_tags) or start_ok.shape != (num_tags,):
                raise ValueError(
                    f"allowed transitions are for {start_ok.numel()} tags, CRF has {num_tags}"
                )
        self.register_buffer("transitions_ok", transitions_ok)
        self.register_buffer("start_ok", start_ok)
        self.register_buffer("end_ok", end_ok)
        # What constrained_scores masks, made once (again when loaded), not every step.
        self.register_buffer("forbidden", self._forbidden_moves(), persistent=False)
        self.register_load_state_dict_post_hook(CRF._constraints_loaded)

    def nll(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor | None = None,
        reduction: Reduction = "mean",
        *,
        validate: bool = True,
    ) -> Tensor:
        """Negative log-likelihood of ``tags`` given ``emissions``: a loss to minimise.

        emissions: ``(batch_size, seq_len, num_tags)``; tags: ``(batch_size, seq_len)`` long,
        any value (e.g. -100) at padding; mask: ``(batch_size, seq_len)`` bool, True at real
        tokens, right-padded (default: all real). ``reduction``: ``mean`` over sequences,
        ``sum``, ``none`` (per sequence) or ``token_mean`` (sum divided by real tokens).

        A gold path that takes a move the constraints forbid raises ValueError: its score would
        be IMPOSSIBLE, a loss of about 10^4 that trains nothing. Tags in another scheme than the
        CRF's (IOB1 tags under a BIOES CRF) are the usual cause. ``validate``: check the mask,
        the tags' range and the gold paths first (reads of the device: ``bistack.masking``
        says when not to).
        """
        mask = self._check(emissions, mask, validate)
        if tags.shape != emissions.shape[:2]:
            raise ValueError(
                f"tags shape {tuple(tags.shape)} does not match emissions "
                f"{tuple(emissions.shape[:2])}"
            )
        tags = tags.masked_fill(~mask, 0)
        if validate:
            real = tags[mask]
            if real.numel() and (int(real.min()) < 0 or int(real.max()) >= self.num_tags):
                raise ValueError(f"tags must be in [0, {self.num_tags}) at real positions")
            self._check_gold_paths(tags, mask)
        # In float32 at least: under bf16 autocast a sentence's log Z (in the hundreds) and its
        # path score would each keep only 8 bits, the loss off by nats.
        (emissions,) = in_float32_or_wider(emissions)
        transitions, start, end = self.constrained_scores()
        nll = self._log_partition(emissions, mask, transitions, start, end) - self._path_score(
            emissions, tags, mask, transitions, start, end
        )  # (batch,)
        if reduction == "none":
            return nll
        if reduction == "sum":
            return nll.sum()
        if reduction == "mean":
            return nll.mean()
        if reduction == "token_mean":
            return nll.sum() / mask.sum()
        raise ValueError(
            f"invalid reduction: {reduction!r} (expected 'mean', 'sum', 'none' or 'token_mean')"
        )

    def decode(
        self,
        emissions: Tensor,
        mask: Tensor | None = None,
        top_k: int = 1,
        *,
        validate: bool = True,
    ) -> CRFDecoding:
        """The ``top_k`` highest-scoring tag paths (Viterbi, tensor backtrace).

        emissions: ``(batch_size, seq_len, num_tags)``; mask and ``validate`` as in :meth:`nll`.
        Paths that do not exist (fewer than ``top_k`` possible) score -inf.
        """
        mask = self._check(emissions, mask, validate)
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        with torch.no_grad():
            if top_k == 1:
                return self._viterbi_best(emissions, mask, *self.constrained_scores())
            return self._viterbi(emissions, mask, top_k, *self.constrained_scores())

    def _check(self, emissions: Tensor, mask: Tensor | None, validate: bool) -> Tensor:
        if emissions.dim() != 3:
            raise ValueError(
                f"emissions must be 3-D (batch_size, seq_len, num_tags), got shape "
                f"{tuple(emissions.shape)}"
            )
        if emissions.size(2) != self.num_tags:
            raise ValueError(
                f"expected last dimension of emissions is {self.num_tags}, got {emissions.size(2)}"
            )
        if mask is None:
            return emissions.new_ones(emissions.shape[:2], dtype=torch.bool)
        if validate:
            check_mask(mask, tuple(emissions.shape[:2]))
        return mask

    def _check_gold_paths(self, tags: Tensor, mask: Tensor) -> None:
        """ValueError naming the first forbidden start, move or end of a gold path."""
        lengths = mask.sum(dim=1)
        last = tags.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        bad_move = ~self.transitions_ok[tags[:, :-1], tags[:, 1:]] & mask[:, 1:]
        bad_start = ~self.start_ok[tags[:, 0]] & (lengths > 0)
        bad_end = ~self.end_ok[last] & (lengths > 0)
        if not (bad_move.any(dim=1) | bad_start | bad_end).any():  # one device sync
            return
        names = self.names
        if bad_start.any():
            row = int(bad_start.nonzero()[0])
            what = f"starts with {names[int(tags[row, 0])]}"
        elif bad_move.any():
            row, t = (int(i) for i in bad_move.nonzero()[0])
            move = f"{names[int(tags[row, t])]} -> {names[int(tags[row, t + 1])]}"
            what = f"moves {move} at position {t + 1}"
        else:
            row = int(bad_end.nonzero()[0])
            what = f"ends with {names[int(last[row])]}"
        raise ValueError(
            f"gold tags of sequence {row} in the batch break the CRF's constraints: it {what}. "
            "Are the tags in the scheme the CRF was built for (convert them with "
            "bistack.schemes.convert_tags)?"
        )

    def constrained_scores(self) -> tuple[Tensor, Tensor, Tensor]:
        """Transition ``(num_tags, num_tags)``, start and end ``(num_tags,)`` scores, with
        forbidden moves set to IMPOSSIBLE: masked as one table (two kernels a step on a GPU,
        and one backward, rather than six and three)."""
        scores = torch.cat(
            [self.transitions, self.start_transitions[None], self.end_transitions[None]]
        ).masked_fill(self.forbidden, IMPOSSIBLE)
        return scores[:-2], scores[-2], scores[-1]

    @staticmethod
    def _constraints_loaded(crf: CRF, _: object) -> None:
        crf.forbidden.copy_(crf._forbidden_moves())

    def _forbidden_moves(self) -> Tensor:
        """``(num_tags + 2, num_tags)`` bool, True where the constraints forbid a move: the
        transitions' rows, then the start's, then the end's."""
        return ~torch.cat([self.transitions_ok, self.start_ok[None], self.end_ok[None]])

    def _path_score(
        self,
        emissions: Tensor,
        tags: Tensor,
        mask: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
    ) -> Tensor:
        # (batch, seq): emission score of each gold tag, zero at padding.
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2) * mask
        # (batch, seq - 1): transition into position t from t - 1, where t is real.
        moved = transitions[tags[:, :-1], tags[:, 1:]] * mask[:, 1:]
        last_tags = tags.gather(1, (mask.sum(dim=1) - 1).unsqueeze(1)).squeeze(1)  # (batch,)
        return start[tags[:, 0]] + emitted.sum(dim=1) + moved.sum(dim=1) + end[last_tags]

    def _log_partition(
        self, emissions: Tensor, mask: Tensor, transitions: Tensor, start: Tensor, end: Tensor
    ) -> Tensor:
        """log Z ``(batch,)``: compiled on CPU, elsewhere a parallel scan or, where the choice
        table says it is faster, a loop over positions (autograd through either)."""
        if runs_compiled(emissions):
            return LogPartitionCPU.apply(emissions, mask.sum(dim=1), transitions, start, end)
        if takes_loop("train", self.num_tags):
            return log_partition_loop(emissions, mask, transitions, start, end)
        return log_partition_scan(emissions, mask, transitions, start, end)

    def _viterbi_best(
        self, emissions: Tensor, mask: Tensor, transitions: Tensor, start: Tensor, end: Tensor
    ) -> CRFDecoding:
        """The hot path (``top_k=1``): compiled on CPU, elsewhere a parallel scan or, where the
        choice table says it is faster, the loop over positions ``_viterbi`` runs."""
        lengths = mask.sum(dim=1)
        if runs_compiled(emissions):
            tags, best = viterbi_best_cpu(emissions, lengths, transitions, start, end)
        elif takes_loop("decode", self.num_tags):
            return self._viterbi(emissions, mask, 1, transitions, start, end)
        else:
            tags, best = viterbi_scan(emissions, mask, transitions, start, end)
        return CRFDecoding(tags=tags.unsqueeze(1), scores=best.unsqueeze(1), lengths=lengths)

    def _viterbi(
        self,
        emissions: Tensor,
        mask: Tensor,
        top_k: int,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
    ) -> CRFDecoding:
        batch_size, seq_len, num_tags = emissions.shape
        k = top_k
        # score[b, tag, r]: r-th best score of a path ending in tag; only rank 0 exists at t=0.
        score = emissions.new_full((batch_size, num_tags, k), float("-inf"))
        score[:, :, 0] = start + emissions[:, 0]
        # At padding, each (tag, rank) points to itself, so the backtrace walks through unchanged.
        identity = torch.arange(num_tags * k, device=emissions.device).view(1, num_tags, k)
        history = []
        for t in range(1, seq_len):
            # (batch, from, k, to) -> (batch, from * k, to): every extension of every kept path.
            candidates = (score.unsqueeze(3) + transitions.unsqueeze(1)).flatten(1, 2)
            best, index = candidates.topk(k, dim=1)  # (batch, k, to)
            best = best.transpose(1, 2) + emissions[:, t].unsqueeze(2)  # (batch, to, k)
            index = index.transpose(1, 2)  # (batch, to, k), into from * k
            real = mask[:, t].view(batch_size, 1, 1)
            score = torch.where(real, best, score)
            history.append(torch.where(real, index, identity))
        final, flat = (score + end.view(1, num_tags, 1)).flatten(1).topk(k, dim=1)  # (batch, k)
        paths = [flat // k]
        for back in reversed(history):
            flat = back.flatten(1).gather(1, flat)  # (batch, k), into from * k
            paths.append(flat // k)
        tags = torch.stack(paths[::-1], dim=2) * mask.unsqueeze(1)  # (batch, k, seq)
        return CRFDecoding(tags=tags, scores=final, lengths=mask.sum(dim=1))


def runs_compiled(emissions: Tensor) -> bool:
    """Whether the compiled kernels (``bistack.kernels.crf_compiled``) take ``emissions``:
    float32 or float64 on the CPU."""
    return emissions.device.type == "cpu" and emissions.dtype in (torch.float32, torch.float64)


def kernel_inputs(
    emissions: Tensor, lengths: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kernels' arguments as contiguous arrays: scores in the emissions' dtype, lengths
    int64 (the arrays share memory with the tensors where no conversion is needed)."""

    def scores(tensor: Tensor) -> np.ndarray:
        return tensor.detach().to(emissions.dtype).contiguous().numpy()

    lengths_array = lengths.detach().to(torch.int64).contiguous().numpy()
    return (scores(emissions), lengths_array, scores(transitions), scores(start), scores(end))


def viterbi_best_cpu(
    emissions: Tensor, lengths: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> tuple[Tensor, Tensor]:
    """Best paths ``(batch, seq_len)`` long (0 at padding) and their scores ``(batch,)``, from
    the compiled kernel (arguments as ``bistack.kernels.crf_compiled`` describes them)."""
    tags, best = viterbi_best(*kernel_inputs(emissions, lengths, transitions, start, end))
    return torch.from_numpy(tags), torch.from_numpy(best)


class LogPartitionCPU(torch.autograd.Function):
    """log Z per sequence ``(batch,)`` with its exact gradient, from the compiled kernel.

    Inputs as :func:`viterbi_best_cpu`. The gradient of log Z is the expected feature count:
    tag marginals for the emissions (and start/end at each sequence's ends), expected
    transition counts for the transitions.
    """

    @staticmethod
    def forward(
        ctx: Any,  # autograd's context: attributes set here are read in backward
        emissions: Tensor,
        lengths: Tensor,
        transitions: Tensor,
        start: Tensor,
        end: Tensor,
    ) -> Tensor:
        with_grad = any(ctx.needs_input_grad)
        arrays = kernel_inputs(emissions, lengths, transitions, start, end)
        log_z, marginals, edges = log_partition(*arrays, with_grad=with_grad)
        if with_grad:
            ctx.save_for_backward(torch.from_numpy(marginals), torch.from_numpy(edges), lengths)
            ctx.dtypes = (emissions.dtype, transitions.dtype, start.dtype, end.dtype)
        return torch.from_numpy(log_z).to(emissions.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_log_z: Tensor) -> tuple[Tensor | None, ...]:
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
