"""Recurrent encoders that never read padding, keep their shape, and are summarised correctly.

Uni- or bidirectional LSTM/GRU encoders, stacked with dropout between layers, or a residual
stack (each layer's input added to its output, projected where sizes differ). The minGRU and
minLSTM cells (``bistack.min_cells``) run the same way with a parallel scan instead of a
sequential recurrence.

No direction ever reads padding, which is what packing guarantees, without PyTorch's packed path:
on CPU its backward pass slices the packed data once per time step and costs 2-4x the fused
kernel (profiled in ``benchmarks/README.md``). Instead each direction runs as one fused,
unpacked, single-layer call: the forward direction over the right-padded batch, where padding
comes after every real token; the backward direction over each sequence reversed *within its own
length*, so its padding also comes last, then reversed back. Outputs keep the padded width (the
``total_length`` of ``pad_packed_sequence``) and are zero at padding. Tests pin the result to
the packed one.

On a CUDA GPU the packed path itself runs (:class:`Packing`): cuDNN reads packed sequences
natively, and each module's weights stay in cuDNN's flat layout, where one direction's weights
taken alone would be copied into that layout on every call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence

from bistack.cells import CELLS, MIN_CELLS, CellName, MinCellName
from bistack.dropout import Dropout
from bistack.dropout import dropout as apply_dropout
from bistack.masking import check_mask, lengths_to_mask, reversal_index
from bistack.min_cells import MinRecurrentLayer
from bistack.transfer import to_device

# What ``RecurrentEncoder.step`` carries: nn.LSTM's (h, c) or nn.GRU's h, one per residual layer,
# or a min cell's h per layer.
EncoderState = Any
# A part of an :class:`EncoderOutput`: the tensor, or how to compute it when first read.
Part = Tensor | Callable[[], Tensor]
_CELLS: dict[str, type[nn.LSTM] | type[nn.GRU]] = {
    "lstm": nn.LSTM,
    "gru": nn.GRU,
}  # bistack.cells' torch ones


class EncoderOutput:
    """What an encoder returns, each part computed when it is first read: a tagger reads only
    the states, a character encoder only the summary, and on a GPU every part left unread would
    be kernel launches spent for nothing.

    states: ``(batch_size, seq_len, output_size)``, zero at padding.
    summary: ``(batch_size, output_size)``, the last layer's final states, forward ⊕ backward.
    mask: ``(batch_size, seq_len)`` bool, True at real tokens.
    """

    def __init__(self, states: Part, summary: Part, mask: Part) -> None:
        self._parts = {"states": states, "summary": summary, "mask": mask}

    def _read(self, name: str) -> Tensor:
        part = self._parts[name]
        if not isinstance(part, Tensor):
            part = self._parts[name] = part()
        return part

    @property
    def states(self) -> Tensor:
        return self._read("states")

    @property
    def summary(self) -> Tensor:
        return self._read("summary")

    @property
    def mask(self) -> Tensor:
        return self._read("mask")


@runtime_checkable
class SequenceEncoder(Protocol):
    """The contract every encoder in a model keeps (models annotate with it, never with a
    concrete class): sizes, direction, a padding-exact ``forward`` and a causal ``step``.

    Pooling reads ``bidirectional`` from here, not from the config, so a new cell (a block, a
    literal in ``EncoderConfig.cell``, a case in ``build_encoder``) needs nothing else.
    """

    @property
    def output_size(self) -> int:
        """Size of each per-position state."""
        ...

    @property
    def bidirectional(self) -> bool:
        """Whether a state reads tokens after its position (then ``step`` is refused)."""
        ...

    def __call__(
        self,
        inputs: Tensor,
        lengths: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        validate: bool = True,
    ) -> EncoderOutput:
        """inputs ``(batch_size, seq_len, input_size)`` and either lengths ``(batch_size,)``
        (best on the host: see ``RecurrentEncoder.forward``) or mask ``(batch_size, seq_len)``
        True at real tokens -> states zero at padding, and the final-state summary.
        ``validate``: check them first (``bistack.masking``)."""
        ...

    def step(self, inputs: Tensor, state: EncoderState) -> tuple[Tensor, EncoderState]:
        """One position ``(batch_size, input_size)`` -> ``(batch_size, output_size)`` and the
        state to carry to the next position."""
        ...


def final_state_summary(h_n: Tensor, num_layers: int, bidirectional: bool) -> Tensor:
    """Summarise ``h_n`` ``(num_layers * D, batch, hidden)`` as ``(batch, D * hidden)``.

    PyTorch orders the first dimension [layer0_fwd, layer0_bwd, layer1_fwd, ...], so ``h_n[-1]``
    is only the last layer's *backward* state. The summary concatenates both directions of the
    last layer instead.
    """
    num_directions = 2 if bidirectional else 1
    _, batch_size, hidden_size = h_n.shape
    last = h_n.view(num_layers, num_directions, batch_size, hidden_size)[-1]
    return torch.cat(list(last), dim=-1)


def last_real_states(states: Tensor, lengths: Tensor, bidirectional: bool) -> Tensor:
    """Final states read off ``states`` ``(batch, seq_len, D * hidden)`` -> ``(batch, D * hidden)``.

    Forward half at position ``length - 1`` ⊕ backward half at position 0: where each direction
    finished reading a right-padded sequence.
    """
    rows = torch.arange(states.size(0), device=states.device)
    # Host lengths (they pack the sequences) indexing device states: copied pinned, without
    # waiting, rather than by the implicit copy indexing makes.
    at_last = states[rows, to_device(lengths - 1, states.device)]  # (batch, D * hidden)
    if not bidirectional:
        return at_last
    half = states.size(-1) // 2
    return torch.cat([at_last[:, :half], states[:, 0, half:]], dim=-1)


def reverse_within_lengths(sequences: Tensor, index: Tensor) -> Tensor:
    """Reverse ``sequences`` ``(batch, seq_len, features)`` by a :func:`reversal_index`."""
    return sequences.gather(1, index.unsqueeze(-1).expand_as(sequences))


@functools.cache
def cpu_runs_recurrence_in(dtype: torch.dtype) -> bool:
    """Whether this CPU's oneDNN has LSTM kernels in ``dtype`` (bfloat16: AVX-512 BF16 or AMX;
    float16: AMX-FP16); elsewhere ``torch.lstm`` under that autocast fails with "could not create
    a primitive descriptor"."""
    probe = nn.LSTM(2, 2, batch_first=True)
    try:
        with torch.autocast("cpu", dtype=dtype):
            probe(torch.zeros(1, 2, 2))
    except RuntimeError:
        return False
    return True


def run_direction(rnn: nn.RNNBase, layer: int, reverse: bool, inputs: Tensor) -> Tensor:
    """One direction of one layer of ``rnn`` over ``inputs`` ``(batch, seq_len, features)``.

    Calls the same fused kernel as ``nn.LSTM``/``nn.GRU`` with that direction's own weights, from
    a zero state -> ``(batch, seq_len, hidden)``. Under CPU autocast without recurrent kernels in
    its precision, the recurrence runs in float32 (mixed precision: the rest stays in it).
    """
    if needs_float32_recurrence(inputs):
        with torch.autocast("cpu", enabled=False):
            return _run_direction(rnn, layer, reverse, inputs.float())
    return _run_direction(rnn, layer, reverse, inputs)


def needs_float32_recurrence(inputs: Tensor) -> bool:
    """Whether a recurrence over ``inputs`` must leave CPU autocast (bfloat16 or float16): on a
    CPU without recurrent kernels in that precision (:func:`cpu_runs_recurrence_in`), where
    ``torch.lstm`` fails."""
    return (
        inputs.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and not cpu_runs_recurrence_in(torch.get_autocast_dtype("cpu"))
    )


def reads_packed(inputs: Tensor) -> bool:
    """Whether a recurrence over ``inputs`` reads packed sequences: on a GPU, where cuDNN's
    packed kernels spend nothing on padding (on the CPU, each direction over the padded batch
    is faster)."""
    return inputs.device.type == "cuda"


@dataclass(frozen=True)
class Packing:
    """How a batch is packed, worked out on the host from its lengths there: ``ranked`` the
    lengths longest first (on the host, as packing wants them), ``order`` the rows in that order
    and ``restore`` its inverse, both copied to the device without waiting. PyTorch's own
    ``enforce_sorted=False`` path sorts too, but copies its order to the device blocking and
    reads its inverse back to the host after every recurrence; this one makes the host wait
    for nothing."""

    ranked: Tensor  # (batch,) int64, on the host
    order: Tensor  # (batch,) the rows, longest first, on the device
    restore: Tensor  # (batch,) where each row went, on the device

    @classmethod
    def of(cls, host_lengths: Tensor, device: torch.device) -> Packing:
        ranked, order = torch.sort(host_lengths.to(torch.int64), descending=True, stable=True)
        restore = torch.empty_like(order)
        restore[order] = torch.arange(order.numel())
        return cls(ranked, to_device(order, device), to_device(restore, device))

    def recur(self, rnn: nn.RNNBase, inputs: Tensor) -> tuple[PackedSequence, Tensor]:
        """``rnn`` (all its layers and directions) over right-padded ``inputs`` ``(batch,
        seq_len, features)``, packed -> its packed output and final hidden states ``h_n``
        ``(num_layers * D, batch, hidden)``, both in this packing's order."""
        packed = nn.utils.rnn.pack_padded_sequence(
            inputs.index_select(0, self.order), self.ranked, batch_first=True
        )
        out, hidden = rnn(packed)
        return out, hidden[0] if isinstance(hidden, tuple) else hidden  # an LSTM's (h_n, c_n)

    def padded(self, out: PackedSequence, width: int) -> Tensor:
        """A packed output back in the batch's order ``(batch, width, D * hidden)``, zero at
        padding."""
        padded = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=width)[0]
        return padded.index_select(0, self.restore)

    def summary(self, h_n: Tensor, rnn: nn.RNNBase) -> Tensor:
        """The last layer's final states, forward ⊕ backward, in the batch's order ``(batch, D
        * hidden)``: where each direction stopped reading, as packing gives them."""
        last = final_state_summary(h_n, rnn.num_layers, rnn.bidirectional)
        return last.index_select(0, self.restore)

    def run(self, rnn: nn.RNNBase, inputs: Tensor) -> Tensor:
        """``rnn`` over ``inputs`` as :meth:`recur` runs it -> ``(batch, seq_len, D * hidden)``,
        zero at padding."""
        return self.padded(self.recur(rnn, inputs)[0], inputs.size(1))


def _run_direction(rnn: nn.RNNBase, layer: int, reverse: bool, inputs: Tensor) -> Tensor:
    suffix = f"_l{layer}" + ("_reverse" if reverse else "")
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    weights = [getattr(rnn, name + suffix) for name in names]
    h0 = inputs.new_zeros(1, inputs.size(0), rnn.hidden_size)
    if isinstance(rnn, nn.LSTM):
        return torch.lstm(inputs, (h0, h0), weights, True, 1, 0.0, rnn.training, False, True)[0]
    return torch.gru(inputs, h0, weights, True, 1, 0.0, rnn.training, False, True)[0]


class RecurrentEncoder(nn.Module):
    """An LSTM, GRU, minGRU or minLSTM encoder, optionally bidirectional, stacked or residual,
    padding-exact.

    With ``residual=True`` each layer is its own single-layer RNN and its (dropped-out) output is
    added to its input, projected by a linear map only where sizes differ ("Stacking
    layers", ``ResidualLSTMStack``). The parameters are plain ``nn.LSTM``/``nn.GRU`` modules
    (``self.rnn``, or ``self.layers`` when residual); only the way they are run differs. The
    min cells are always one ``MinRecurrentLayer`` per layer in ``self.layers``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        *,
        cell: CellName = "lstm",
        bidirectional: bool = True,
        num_layers: int = 1,
        dropout: float = 0.0,
        residual: bool = False,
    ) -> None:
        super().__init__()
        if cell not in CELLS:
            expected = ", ".join(map(repr, CELLS[:-1])) + f" or {CELLS[-1]!r}"
            raise ValueError(f"unknown cell: {cell!r} (expected {expected})")
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.cell: CellName = cell
        self.bidirectional = bidirectional
        self.num_layers = num_layers
        self.residual = residual
        self.layer_dropout = dropout
        sizes = [input_size] + [self.output_size] * num_layers
        if cell in MIN_CELLS:
            self.layers = nn.ModuleList(
                MinRecurrentLayer(cast(MinCellName, cell), size, hidden_size, bidirectional)
                for size in sizes[:-1]
            )
            if residual:
                self.projections = nn.ModuleList(
                    nn.Identity() if size == self.output_size else nn.Linear(size, self.output_size)
                    for size in sizes[:-1]
                )
                self.dropout = Dropout(dropout)
            return
        rnn_class = _CELLS[cell]
        if residual:
            self.layers = nn.ModuleList(
                rnn_class(size, hidden_size, batch_first=True, bidirectional=bidirectional)
                for size in sizes[:-1]
            )
            self.projections = nn.ModuleList(
                nn.Identity() if size == self.output_size else nn.Linear(size, self.output_size)
                for size in sizes[:-1]
            )
            self.dropout = Dropout(dropout)
        else:
            self.rnn = rnn_class(
                input_size,
                hidden_size,
                num_layers=num_layers,
                batch_first=True,
                bidirectional=bidirectional,
                dropout=dropout if num_layers > 1 else 0.0,
            )

    @property
    def output_size(self) -> int:
        """Size of each per-position state: 2 × hidden when bidirectional."""
        return self.hidden_size * (2 if self.bidirectional else 1)

    def forward(
        self,
        inputs: Tensor,
        lengths: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        validate: bool = True,
    ) -> EncoderOutput:
        """Encode ``inputs`` ``(batch_size, seq_len, input_size)``.

        Give either ``lengths`` ``(batch_size,)`` (each in 1..seq_len) or ``mask``
        ``(batch_size, seq_len)`` bool, True at real tokens, right-padded. ``validate``: check
        them first (reads of the device; ``bistack.masking`` says when not to). Lengths given on
        the host (a batch's, from its collation) let a GPU pack the batch without waiting;
        lengths or a mask on the device are read back for that.
        """
        host = lengths if lengths is not None and lengths.device.type == "cpu" else None
        real_lengths, real = self._check_inputs(inputs, lengths, mask, validate)
        x = inputs
        if self.cell in MIN_CELLS:  # their backward direction starts at each sequence's end
            for number, layer in enumerate(self.layers):
                if self.residual:
                    x = self.dropout(layer(x, real_lengths())) + self.projections[number](x)
                else:
                    if number > 0:
                        x = apply_dropout(x, self.layer_dropout, self.training)
                    x = layer(x, real_lengths())
            return self._output(x, real_lengths, real)
        if reads_packed(inputs) and not self.bidirectional:  # padding comes after each text
            return self._output(self._run_whole(x, lambda rnn, x: rnn(x)[0]), real_lengths, real)
        if reads_packed(inputs):
            packing = Packing.of(host if host is not None else real_lengths().cpu(), inputs.device)
            if self.residual:  # each layer's input added at padding too: masked after
                return self._output(self._run_whole(x, packing.run), real_lengths, real)
            out, h_n = packing.recur(self.rnn, x)
            width = x.size(1)
            return EncoderOutput(
                states=lambda: packing.padded(out, width),  # zero at padding already
                summary=lambda: packing.summary(h_n, self.rnn),
                mask=real,
            )
        index = reversal_index(real_lengths(), inputs.size(1)) if self.bidirectional else None
        if self.residual:
            for rnn, projection in zip(self.layers, self.projections, strict=True):
                run = self._run_layer(cast(nn.RNNBase, rnn), 0, x, index)
                x = self.dropout(run) + projection(x)
        else:
            for depth in range(self.num_layers):
                if depth > 0:  # as nn.LSTM: dropout on every layer's output but the last
                    x = apply_dropout(x, self.rnn.dropout, self.training)
                x = self._run_layer(self.rnn, depth, x, index)
        return self._output(x, real_lengths, real)

    def _output(self, x: Tensor, lengths: Callable[[], Tensor], mask: Part) -> EncoderOutput:
        """The parts of ``x`` ``(batch, seq_len, D * hidden)``: real positions never saw
        padding, the padding positions themselves hold junk (zeroed in the states). Each
        direction's final state is its output where it stopped reading: the forward half at
        length - 1, the backward half at 0 (the residual sum likewise)."""
        output = EncoderOutput(
            states=lambda: x.masked_fill(~output.mask.unsqueeze(-1), 0.0),
            summary=lambda: last_real_states(x, lengths(), self.bidirectional),
            mask=mask,
        )
        return output

    def _run_whole(self, x: Tensor, run: Callable[[nn.RNNBase, Tensor], Tensor]) -> Tensor:
        """Every layer as cuDNN runs it, ``run(rnn, x)``: the modules' own flat weights (no copy
        per call, as one direction's weights alone would need) over a packed sequence, or, one
        direction alone, over the padded batch (each real position reads only the real ones
        before it) -> ``(batch, seq_len, output_size)``."""
        if not self.residual:
            return run(self.rnn, x)
        for rnn, projection in zip(self.layers, self.projections, strict=True):
            x = self.dropout(run(cast(nn.RNNBase, rnn), x)) + projection(x)
        return x

    def _run_layer(self, rnn: nn.RNNBase, layer: int, x: Tensor, index: Tensor | None) -> Tensor:
        """Both directions of one layer -> ``(batch, seq_len, output_size)``."""
        forward = run_direction(rnn, layer, False, x)
        if index is None:
            return forward
        backward = run_direction(rnn, layer, True, reverse_within_lengths(x, index))
        return torch.cat([forward, reverse_within_lengths(backward, index)], dim=-1)

    def step(
        self, inputs: Tensor, state: EncoderState | None = None
    ) -> tuple[Tensor, EncoderState]:
        """One time step of a unidirectional encoder, carrying the recurrent state.

        inputs ``(batch_size, input_size)`` -> outputs ``(batch_size, output_size)`` equal to
        ``forward``'s states at this position, and the state to pass to the next step. A
        bidirectional encoder cannot run step by step: its backward direction reads tokens that
        have not arrived yet.
        """
        if self.bidirectional:
            raise ValueError(
                "a bidirectional encoder cannot run one token at a time: its backward direction "
                "needs the tokens after the current one (use bidirectional=False to stream)"
            )
        if self.cell in MIN_CELLS:  # the same layers as ``forward``, one position at a time
            states = list(state) if state is not None else [None] * self.num_layers
            x = inputs
            for number, layer in enumerate(self.layers):
                if not self.residual and number > 0:
                    x = apply_dropout(x, self.layer_dropout, self.training)
                states[number] = out = cast(MinRecurrentLayer, layer).step(x, states[number])
                x = self.dropout(out) + self.projections[number](x) if self.residual else out
            return x, tuple(states)
        x = inputs.unsqueeze(1)  # (batch_size, 1, input_size)
        if not self.residual:
            out, new_state = self.rnn(x, state)
            return out.squeeze(1), new_state
        states = list(state) if state is not None else [None] * self.num_layers
        for index, (rnn, projection) in enumerate(zip(self.layers, self.projections, strict=True)):
            out, states[index] = rnn(x, states[index])
            x = self.dropout(out) + projection(x)
        return x.squeeze(1), tuple(states)

    def _check_inputs(
        self, inputs: Tensor, lengths: Tensor | None, mask: Tensor | None, validate: bool
    ) -> tuple[Callable[[], Tensor], Part]:
        """Lengths and mask on the inputs' device, each computed once when first asked for (a
        GPU's packed recurrence needs neither)."""
        if inputs.dim() != 3:
            raise ValueError(
                f"inputs must be 3-D (batch_size, seq_len, input_size), got shape "
                f"{tuple(inputs.shape)}"
            )
        batch_size, seq_len, features = inputs.shape
        if features != self.input_size:
            raise ValueError(f"inputs have {features} features, encoder expects {self.input_size}")
        if (lengths is None) == (mask is None):
            raise ValueError("give exactly one of lengths or mask")
        if mask is not None:
            if validate:
                check_mask(mask, (batch_size, seq_len))
            return functools.cache(lambda: mask.sum(dim=1)), mask
        assert lengths is not None
        if validate:
            check_lengths(lengths, batch_size, seq_len)
        given = lengths
        on_device = functools.cache(lambda: to_device(given, inputs.device))
        return on_device, lambda: lengths_to_mask(on_device(), seq_len, validate=False)


def check_lengths(lengths: Tensor, batch_size: int, seq_len: int) -> None:
    """Raise ValueError unless ``lengths`` is ``(batch_size,)`` integers in 1..seq_len."""
    if lengths.dim() != 1 or lengths.size(0) != batch_size:
        raise ValueError(f"lengths must have shape ({batch_size},), got {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be an integer tensor, got {lengths.dtype}")
    low, high = torch.stack(torch.aminmax(lengths)).tolist()  # one wait for the device
    if low < 1:
        raise ValueError(f"lengths must be >= 1, got {low}")
    if high > seq_len:
        raise ValueError(f"lengths must be <= seq_len={seq_len}, got {high}")
