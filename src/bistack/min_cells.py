"""minGRU and minLSTM: recurrent cells whose whole layer is one matrix product and a parallel scan.

Feng et al. 2024, "Were RNNs All We Needed?": drop the hidden state from the gates, and the
recurrence becomes linear in the state, ``h_t = a_t ⊙ h_{t-1} + b_t``, with ``a_t`` and ``b_t``
computed from the inputs alone, for every position at once:

- minGRU: ``z_t = σ(W_z x_t)``, ``a_t = 1 - z_t``, ``b_t = z_t ⊙ g(W_h x_t)``;
- minLSTM: ``f_t = σ(W_f x_t)``, ``i_t = σ(W_i x_t)``, normalised to sum to one
  (``f'_t = f_t / (f_t + i_t)``), ``a_t = f'_t``, ``b_t = i'_t ⊙ g(W_h x_t)``;

where ``g(x) = x + 0.5`` for ``x >= 0`` and ``σ(x)`` below keeps the candidate state positive.
The scan runs in log space (the paper's stable form): with ``A_t = Σ_{j<=t} log a_j``,
``log h_t = A_t + logcumsumexp_{k<=t}(log b_k - A_k)``, from ``h_0 = 0``. It is causal: a
position reads only positions before it, so padding after a sequence is never read, and the
backward direction of a bidirectional layer runs over each sequence reversed within its own
length, as the LSTM's does (``bistack.encoders``).

Tests hold the scan to the recurrence written plainly, step by step (values and gradients, in
float64), and ``step`` to the scan. On CPU the layer runs as one compiled kernel
(``bistack.kernels.min_cells_compiled``), held to this log-space scan in the tests. Exported to
ONNX, the recurrence is a TorchScript loop over positions (an ONNX ``Loop``), in linear space as the
compiled kernel runs it: ONNX has no cumulative log-sum-exp.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bistack.cells import MinCellName
from bistack.kernels.min_cells_compiled import LinearScan, runs_compiled
from bistack.masking import reversal_index

_GATES = {"mingru": 2, "minlstm": 3}  # linear maps of the input per cell


def candidate(x: Tensor) -> Tensor:
    """``g``: positive, continuous, linear above 0: ``x + 0.5`` there, ``σ(x)`` below (as
    ``relu(x) + σ(min(x, 0))``, which costs a fraction of a ``torch.where`` and its backward)."""
    return F.relu(x) + torch.sigmoid(x.clamp(max=0.0))


def log_candidate(x: Tensor) -> Tensor:
    """``log g(x)``, computed without taking the log of a small number."""
    return torch.where(x >= 0, torch.log(F.relu(x) + 0.5), -F.softplus(-x))


def linear_recurrence(keep: Tensor, add: Tensor) -> Tensor:
    """``h_t = keep_t h_{t-1} + add_t`` from ``h_0 = 0``, position by position, for
    ``(batch, seq, hidden)`` coefficients: the ONNX export's loop."""
    state = torch.zeros_like(add[:, 0])
    states = []
    for t in range(add.size(1)):
        state = keep[:, t] * state + add[:, t]
        states.append(state)
    return torch.stack(states, dim=1)


@functools.cache
def scripted_recurrence() -> Any:
    """:func:`linear_recurrence` compiled by TorchScript, once, on first export (its loop
    becomes an ONNX ``Loop`` whose trip count is the batch's width)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(linear_recurrence)


class MinCell(nn.Module):
    """One direction of one minGRU or minLSTM layer: inputs ``(batch, seq, input_size)`` ->
    states ``(batch, seq, hidden_size)``, each a function of the inputs up to its position."""

    def __init__(self, cell: MinCellName, input_size: int, hidden_size: int) -> None:
        super().__init__()
        if cell not in _GATES:
            raise ValueError(f"unknown cell: {cell!r} (expected 'mingru' or 'minlstm')")
        self.cell: MinCellName = cell
        self.hidden_size = hidden_size
        self.gates = nn.Linear(input_size, _GATES[cell] * hidden_size)

    def log_coefficients(self, pre: Tensor) -> tuple[Tensor, Tensor]:
        """``(log a, log b)`` of ``h_t = a_t h_{t-1} + b_t``, each ``(batch, seq, hidden)``, from
        the gates' pre-activations ``pre`` ``(batch, seq, gates * hidden)``."""
        parts = pre.chunk(_GATES[self.cell], dim=-1)
        if self.cell == "mingru":
            gate, state = parts
            log_keep = -F.softplus(gate)  # log(1 - z)
            log_take = -F.softplus(-gate)  # log z
        else:
            forget, take, state = parts
            # log f' and log i' of f' = f / (f + i), i' = i / (f + i), from the gates' logits.
            difference = F.softplus(-forget) - F.softplus(-take)
            log_keep = -F.softplus(difference)
            log_take = -F.softplus(-difference)
        return log_keep, log_take + log_candidate(state)

    def coefficients(self, pre: Tensor) -> tuple[Tensor, Tensor]:
        """``(a, b)`` of ``h_t = a_t h_{t-1} + b_t`` in linear space, from the gates'
        pre-activations ``pre`` ``(batch, seq, gates * hidden)``."""
        parts = pre.chunk(_GATES[self.cell], dim=-1)
        if self.cell == "mingru":
            gate, state = parts
            take = torch.sigmoid(gate)
            return 1.0 - take, take * candidate(state)
        forget, take, state = parts
        forget, take = torch.sigmoid(forget), torch.sigmoid(take)
        total = forget + take
        return forget / total, take / total * candidate(state)

    def forward(
        self, inputs: Tensor, lengths: Tensor | None = None, backward: bool = False
    ) -> Tensor:
        """Every position at once: one matrix product, then the scan (compiled on CPU), left to
        right; ``backward``: right to left from each sequence's own end (``lengths``), as a
        bidirectional layer's second direction reads it."""
        pre = self.gates(inputs)
        if torch.onnx.is_in_onnx_export():
            return self.exported_scan(pre, lengths, backward)
        if runs_compiled(pre):
            if lengths is None:
                lengths = torch.full((inputs.size(0),), inputs.size(1), dtype=torch.long)
            return LinearScan.apply(*self.coefficients(pre), lengths, backward)
        if not backward:
            return self.log_space_scan(pre)
        if lengths is None:
            raise ValueError("the backward direction needs the sequences' lengths")
        index = reversal_index(lengths, inputs.size(1)).unsqueeze(-1).expand_as(pre)
        reversed_states = self.log_space_scan(pre.gather(1, index))
        return reversed_states.gather(1, index[..., : self.hidden_size])

    def exported_scan(self, pre: Tensor, lengths: Tensor | None, backward: bool) -> Tensor:
        """The scan as ONNX runs it: the linear recurrence as a loop, the backward direction
        over each sequence reversed within its own length (a ``Gather``)."""
        keep, add = self.coefficients(pre)
        if not backward:
            return scripted_recurrence()(keep, add)
        if lengths is None:
            raise ValueError("the backward direction needs the sequences' lengths")
        index = reversal_index(lengths, pre.size(1)).unsqueeze(-1).expand_as(keep)
        states = scripted_recurrence()(keep.gather(1, index), add.gather(1, index))
        return states.gather(1, index)

    def log_space_scan(self, pre: Tensor) -> Tensor:
        """The parallel scan in log space from the gates' pre-activations (any device)."""
        log_keep, log_add = self.log_coefficients(pre)
        decay = torch.cumsum(log_keep, dim=1)  # (batch, seq, hidden): A_t
        return torch.exp(decay + torch.logcumsumexp(log_add - decay, dim=1))

    def step(self, inputs: Tensor, state: Tensor | None) -> Tensor:
        """One position ``(batch, input_size)`` from the previous state ``(batch, hidden)``
        (None: the zero state) -> the new state: the recurrence itself, in linear space."""
        log_keep, log_add = self.log_coefficients(self.gates(inputs))
        if state is None:
            return log_add.exp()
        return log_keep.exp() * state + log_add.exp()


class MinRecurrentLayer(nn.Module):
    """A minGRU or minLSTM layer, one direction or two (separate weights, outputs
    concatenated: forward ⊕ backward)."""

    def __init__(
        self, cell: MinCellName, input_size: int, hidden_size: int, bidirectional: bool
    ) -> None:
        super().__init__()
        directions = 2 if bidirectional else 1
        self.directions = nn.ModuleList(
            MinCell(cell, input_size, hidden_size) for _ in range(directions)
        )
        self.output_size = directions * hidden_size

    def forward(self, inputs: Tensor, lengths: Tensor | None = None) -> Tensor:
        """inputs ``(batch, seq, input_size)`` -> ``(batch, seq, output_size)``; the backward
        direction reads each sequence from its own end (``lengths`` ``(batch,)``)."""
        forward = self.directions[0](inputs)
        if len(self.directions) == 1:
            return forward
        if lengths is None:
            raise ValueError("a bidirectional layer needs the lengths of its sequences")
        return torch.cat([forward, self.directions[1](inputs, lengths, backward=True)], dim=-1)

    def step(self, inputs: Tensor, state: Tensor | None) -> Tensor:
        """One position of a one-direction layer; the output is the new state."""
        return cast(MinCell, self.directions[0]).step(inputs, state)
