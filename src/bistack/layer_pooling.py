"""Pooling over transformer layers (an LSTM over the layers' CLS vectors, and its rivals).

Every pooler maps per-layer vectors ``(batch_size, num_layers, hidden_size)`` (one vector per
layer, layer 1 first, the embedding output excluded) to ``(batch_size, output_size)``. The
per-layer vectors are the CLS vector of each layer, or the masked mean of its token states;
the caller chooses, and the frozen-backbone feature cache stores both. In a training loop of
your own, :func:`layer_vectors` makes them from a HuggingFace model's ``hidden_states`` and
attention mask.

Layers are a sequence over *depth*: a recurrent pooler reads them shallow to deep (and deep to
shallow for the backward direction), so reversing the layers changes its output, while a
weighted or mean pooling is order-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn

from bistack.dropout import Dropout
from bistack.encoders import needs_float32_recurrence

RecurrentSummary = Literal["final_states", "last_output"]
LayerVectorKind = Literal["cls", "mean"]


def layer_vectors(
    hidden_states: Sequence[Tensor], attention_mask: Tensor, vectors: LayerVectorKind = "cls"
) -> Tensor:
    """Per-layer vectors ``(batch, num_layers, hidden)`` for a pooler, from what a HuggingFace
    encoder returns with ``output_hidden_states=True``: ``hidden_states``, the embedding output
    then each layer's states, each ``(batch, seq, hidden)``, and the ``attention_mask``
    ``(batch, seq)`` (1 at real tokens). ``vectors``: each layer's ``cls`` vector (position 0)
    or the ``mean`` of its real tokens' states (padding never counts). The embedding output is
    left out: it is no layer's work. Differentiable, so the encoder can be fine-tuned
    through it."""
    if vectors not in ("cls", "mean"):
        raise ValueError(f"vectors must be 'cls' or 'mean', got {vectors!r}")
    if len(hidden_states) < 2:
        raise ValueError(
            "hidden_states: expected the embedding output and at least one layer's states "
            "(call the model with output_hidden_states=True)"
        )
    states = torch.stack(tuple(hidden_states[1:]), dim=1)  # (batch, layers, seq, hidden)
    expected = (states.shape[0], states.shape[2])  # (batch, seq)
    if tuple(attention_mask.shape) != expected:
        raise ValueError(
            f"attention_mask: expected shape {expected} (batch, seq), got "
            f"{tuple(attention_mask.shape)}"
        )
    if vectors == "cls":
        return states[:, :, 0]
    mask = attention_mask.to(states.dtype)  # (batch, seq)
    sums = torch.einsum("blsh,bs->blh", states, mask)
    return sums / mask.sum(dim=1).clamp(min=1.0)[:, None, None]


def select_layers(num_layers: int, selection: str | Sequence[int]) -> list[int]:
    """1-based indices of the layers to pool, in depth order.

    ``"all"``: 1..N. ``"every_other"`` (every other layer, for speed): the last
    layer and every second one below it, e.g. 2, 4, 6 of 6. A list: those layers, checked.
    """
    if selection == "all":
        return list(range(1, num_layers + 1))
    if selection == "every_other":
        return list(range(num_layers, 0, -2))[::-1]
    if isinstance(selection, str):
        raise ValueError(
            f"layer selection must be 'all', 'every_other' or a list of layers, got {selection!r}"
        )
    layers = list(selection)
    if not layers:
        raise ValueError("layer selection is an empty list")
    for layer in layers:
        if not isinstance(layer, int) or not 1 <= layer <= num_layers:
            raise ValueError(
                f"layer {layer!r} is not a transformer layer of this model (1..{num_layers}; "
                "0, the embedding output, is excluded)"
            )
    if layers != sorted(set(layers)):
        raise ValueError(f"layers must be distinct and in depth order, got {layers}")
    return layers


def _check_layers(layers: Tensor, hidden_size: int) -> None:
    if layers.dim() != 3 or layers.shape[-1] != hidden_size:
        raise ValueError(
            f"expected per-layer vectors (batch_size, num_layers, {hidden_size}), "
            f"got {tuple(layers.shape)}"
        )


class RecurrentLayerPooling(nn.Module):
    """LSTM pooling, as in the CommonLit write-ups: a BiLSTM (or BiGRU) over the layers, then
    dropout.

    ``summary="last_output"`` is the common hand-written ``out[:, -1, :]``: its backward half has
    read only the last layer. ``"final_states"`` (default) is the forward state after the last
    layer ⊕ the backward state after the first, so both directions have read every layer.
    """

    def __init__(
        self,
        hidden_size: int,
        lstm_hidden: int = 256,
        *,
        cell: Literal["lstm", "gru"] = "lstm",
        summary: RecurrentSummary = "final_states",
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if summary not in ("final_states", "last_output"):
            raise ValueError(f"summary must be 'final_states' or 'last_output', got {summary!r}")
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(hidden_size, lstm_hidden, batch_first=True, bidirectional=True)
        self.hidden_size = hidden_size
        self.summary = summary
        self.dropout = Dropout(dropout)
        self.output_size = 2 * lstm_hidden

    def forward(self, layers: Tensor) -> Tensor:
        """layers ``(batch_size, num_layers, hidden_size)`` -> ``(batch_size, 2 * lstm_hidden)``.

        Every sequence has the same length (the number of layers), so nothing is padded or packed.
        """
        _check_layers(layers, self.hidden_size)
        if needs_float32_recurrence(layers):  # bf16 autocast on a CPU without bf16 LSTMs
            with torch.autocast("cpu", enabled=False):
                out, state = self.rnn(layers.float())
        else:
            out, state = self.rnn(layers)  # out: (batch_size, num_layers, 2 * lstm_hidden)
        if self.summary == "last_output":
            return self.dropout(out[:, -1, :])
        h_n = state[0] if isinstance(state, tuple) else state  # (2, batch_size, lstm_hidden)
        return self.dropout(torch.cat([h_n[0], h_n[1]], dim=-1))


class WeightedLayerPooling(nn.Module):
    """ScalarMix (Peters et al. 2018): softmax-normalised learned weights over the layers from
    ``start_layer`` (1-based position in the input) on, times a learned scale ``gamma``."""

    def __init__(self, num_layers: int, hidden_size: int, start_layer: int = 1) -> None:
        super().__init__()
        if not 1 <= start_layer <= num_layers:
            raise ValueError(f"start_layer must be in 1..{num_layers}, got {start_layer}")
        self.start = start_layer - 1
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.weights = nn.Parameter(torch.zeros(num_layers - self.start))
        self.gamma = nn.Parameter(torch.ones(()))
        self.output_size = hidden_size

    def forward(self, layers: Tensor) -> Tensor:
        """layers ``(batch_size, num_layers, hidden_size)`` -> ``(batch_size, hidden_size)``."""
        _check_layers(layers, self.hidden_size)
        if layers.shape[1] != self.num_layers:
            raise ValueError(f"expected {self.num_layers} layers, got {layers.shape[1]}")
        mix = torch.softmax(self.weights, dim=0)  # (num_used,)
        return self.gamma * torch.einsum("l,blh->bh", mix, layers[:, self.start :])


class AttentionLayerPooling(nn.Module):
    """Attention over layers with a learned query: ``a_l = softmax(q · k_l / sqrt(d))`` with
    keys ``k_l = W x_l``, the output ``Σ a_l x_l``."""

    def __init__(self, hidden_size: int, attention_size: int = 128) -> None:
        super().__init__()
        self.key = nn.Linear(hidden_size, attention_size, bias=False)
        self.query = nn.Parameter(torch.randn(attention_size) / attention_size**0.5)
        self.scale = attention_size**-0.5
        self.hidden_size = hidden_size
        self.output_size = hidden_size

    def weights(self, layers: Tensor) -> Tensor:
        """``(batch_size, num_layers)`` attention over the layers (rows sum to 1)."""
        scores = self.key(layers) @ self.query * self.scale  # (batch_size, num_layers)
        return torch.softmax(scores, dim=-1)  # every layer is real: no mask to apply

    def forward(self, layers: Tensor) -> Tensor:
        """layers ``(batch_size, num_layers, hidden_size)`` -> ``(batch_size, hidden_size)``."""
        _check_layers(layers, self.hidden_size)
        return torch.bmm(self.weights(layers).unsqueeze(1), layers).squeeze(1)


class LastLayerPooling(nn.Module):
    """The last layer's vector: its CLS vector, or its masked token mean, as the features say."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.output_size = hidden_size

    def forward(self, layers: Tensor) -> Tensor:
        """layers ``(batch_size, num_layers, hidden_size)`` -> ``(batch_size, hidden_size)``."""
        _check_layers(layers, self.hidden_size)
        return layers[:, -1]


class ConcatLastLayersPooling(nn.Module):
    """The last ``count`` layers' vectors concatenated, deepest first (BERT paper, Table 7)."""

    def __init__(self, hidden_size: int, count: int = 4) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.count = count
        self.output_size = count * hidden_size

    def forward(self, layers: Tensor) -> Tensor:
        """layers ``(batch_size, num_layers, hidden_size)`` -> ``(batch_size, count * hidden)``."""
        _check_layers(layers, self.hidden_size)
        if layers.shape[1] < self.count:
            raise ValueError(f"need at least {self.count} layers, got {layers.shape[1]}")
        return layers[:, -self.count :].flip(1).flatten(1)


LAYER_POOLERS: tuple[str, ...] = (
    "lstm",
    "gru",
    "weighted",
    "attention",
    "cls",
    "mean",
    "concat_last4",
    "concat_all",
)


def pooler_features(name: str, vectors: Literal["cls", "mean"] = "cls") -> Literal["cls", "mean"]:
    """Which per-layer vectors a pooler reads: ``cls`` and ``mean`` their own, the rest
    ``vectors``."""
    if name in ("cls", "mean"):
        return "cls" if name == "cls" else "mean"
    return vectors


# Every pooler over layers: ``(batch_size, num_layers, hidden_size)`` -> ``(batch_size,
# output_size)``.
LayerPooler = (
    RecurrentLayerPooling
    | WeightedLayerPooling
    | AttentionLayerPooling
    | LastLayerPooling
    | ConcatLastLayersPooling
)


def build_layer_pooler(
    name: str,
    num_layers: int,
    hidden_size: int,
    *,
    lstm_hidden: int = 256,
    summary: RecurrentSummary = "final_states",
    dropout: float = 0.1,
    start_layer: int = 1,
) -> LayerPooler:
    """The pooler a config names, for ``num_layers`` selected layers of ``hidden_size``."""
    if name in ("lstm", "gru"):
        return RecurrentLayerPooling(
            hidden_size,
            lstm_hidden,
            cell="lstm" if name == "lstm" else "gru",
            summary=summary,
            dropout=dropout,
        )
    if name == "weighted":
        return WeightedLayerPooling(num_layers, hidden_size, start_layer)
    if name == "attention":
        return AttentionLayerPooling(hidden_size)
    if name in ("cls", "mean"):
        return LastLayerPooling(hidden_size)
    if name == "concat_last4":
        if num_layers < 4:
            raise ValueError(f"concat_last4 reads the last 4 layers; it is given {num_layers}")
        return ConcatLastLayersPooling(hidden_size, 4)
    if name == "concat_all":
        return ConcatLastLayersPooling(hidden_size, num_layers)
    raise ValueError(f"unknown layer pooler {name!r} (expected one of {', '.join(LAYER_POOLERS)})")
