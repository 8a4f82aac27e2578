"""A text model's inference as one traceable module, for ONNX export: inputs -> ``scores``
``(texts, num_outputs)``, the network's raw outputs (logits, or standardised values), which the
runtime turns into probabilities (the temperature applied) or values in original units (the
calibration applied) with the same code as PyTorch (``bistack.text_models.outputs``), and, when
the pooling attends, ``attention`` ``(texts, seq)``, exactly 0 at padding."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from bistack.files.onnx_session import WINDOW_INPUTS
from bistack.masking import lengths_to_mask
from bistack.models.graphs import token_vectors

if TYPE_CHECKING:
    from bistack.text_models.layer_network import LayerPoolingModel, WordBranch
    from bistack.text_models.network import SequenceClassifier

# A model over a transformer reads subword windows: input_ids, attention_mask ``(windows,
# seq)``, window_text ``(windows,)`` the text each window belongs to, and text_index
# ``(texts,)`` = 0..texts-1 (a text cut into several windows has several rows).
LAYER_INPUTS = WINDOW_INPUTS

LAYER_DYNAMIC_AXES = {
    "input_ids": {0: "windows", 1: "seq"},
    "attention_mask": {0: "windows", 1: "seq"},
    "window_text": {0: "windows"},
    "text_index": {0: "texts"},
}


def example_texts(variant: int) -> list[str]:
    """Texts of several lengths; variant 1 has other lengths and a text longer than a window."""
    return [
        ["a short text", "the second text is rather longer than the first one", "x"],
        ["one", "two words", "many " * 600],
    ][variant]


def example_subwords(backbone: Any, options: Any, texts: list[str]) -> tuple[Tensor, ...]:
    """``texts`` as ``LAYER_INPUTS``, tokenized as the model tokenizes them."""
    limit = backbone.limit(options.max_length)
    batch = backbone.tokenize(texts, options.long_texts, options.stride, limit)
    return (
        batch.input_ids,
        batch.attention_mask,
        batch.window_text,
        torch.arange(len(texts)),
    )


def pooled_reading(branch: WordBranch, inputs: tuple[Tensor, ...]) -> Tensor:
    """A stacked model's word branch (``WordBranch``) in inference over ``INPUTS``, char words
    in one group -> ``(batch, branch.output_size)``."""
    lengths = inputs[-1]
    mask = lengths_to_mask(lengths, inputs[0].size(1))
    states = branch.encoder(token_vectors(branch.embedder, inputs), mask=mask).states
    return branch.pooling(states, mask).vector


class TextGraph(nn.Module):
    """A recurrent text model's inference: ``INPUTS`` -> ``scores`` ``(batch, num_outputs)``
    and, when the pooling attends (``attends``), ``attention`` ``(batch, seq)``."""

    def __init__(self, network: SequenceClassifier, *, attends: bool) -> None:
        super().__init__()
        self.network = network
        self.attends = attends
        self.eval()  # the exporter restores this mode after tracing: it must be inference

    @property
    def output_names(self) -> tuple[str, ...]:
        return ("scores", "attention") if self.attends else ("scores",)

    def forward(self, *inputs: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        lengths = inputs[-1]
        mask = lengths_to_mask(lengths, inputs[0].size(1))
        network = self.network
        states = network.encoder(token_vectors(network.embedder, inputs), mask=mask).states
        pooled = network.pooling(states, mask)
        scores = network.head(pooled.vector)  # (batch, num_outputs)
        if self.attends:
            return scores, pooled.weights
        return scores


def layer_states(transformer: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """Every layer's states of each window ``(windows, layers, seq, hidden)``."""
    output = transformer(
        input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
    )
    return torch.stack(output.hidden_states[1:], dim=1)


def layer_vectors(
    states: Tensor, attention_mask: Tensor, window_text: Tensor, text_index: Tensor, kind: str
) -> Tensor:
    """Every layer's CLS vector (``kind`` ``cls``) or token mean (``mean``) per text ``(texts,
    layers, hidden)`` from its windows' ``states``, the mean over a text's windows, as
    ``TransformerBackbone.forward`` takes it. Windows are summed into texts by a ``(texts,
    windows)`` 0/1 matrix product rather than ``index_add_``: the same sums, in plain MatMul
    nodes."""
    mask = attention_mask.to(states.dtype)
    belongs = (text_index.unsqueeze(1) == window_text.unsqueeze(0)).to(states.dtype)
    if kind == "cls":
        sums = torch.einsum("tw,wlh->tlh", belongs, states[:, :, 0])
        return sums / belongs.sum(dim=1)[:, None, None]
    token_sums = torch.einsum("wlsh,ws->wlh", states, mask)
    sums = torch.einsum("tw,wlh->tlh", belongs, token_sums)
    return sums / (belongs @ mask.sum(dim=1))[:, None, None]


class LayerTextGraph(nn.Module):
    """A classifier or regressor over a transformer's layers: subword windows -> every layer's
    CLS or mean vector per text (:func:`layer_vectors`) -> the layer pooling head -> ``scores``
    ``(texts, num_outputs)``. A model that stacks the texts' own features reads their
    ``INPUTS`` after ``LAYER_INPUTS`` and joins its word branch's vector to the pooled layers,
    as in training."""

    output_names = ("scores",)

    def __init__(self, transformer: nn.Module, head: LayerPoolingModel) -> None:
        super().__init__()
        self.transformer = transformer
        self.head = head
        self.eval()  # the exporter restores this mode after tracing: it must be inference

    def forward(self, *inputs: Tensor) -> Tensor:
        input_ids, attention_mask, window_text, text_index = inputs[:4]
        states = layer_states(self.transformer, input_ids, attention_mask)
        layers = layer_vectors(states, attention_mask, window_text, text_index, self.head.features)
        words = None if self.head.words is None else pooled_reading(self.head.words, inputs[4:])
        return self.head.outputs_with(layers, words)  # (texts, num_outputs)


class LayerVectorsGraph(nn.Module):
    """The frozen backbone the members of an exported ensemble share: subword windows ->
    ``(texts, layers, hidden)`` per-layer vectors of each kind its members read (``kinds``:
    ``cls``, ``mean``), one output a kind, run once a batch for every member."""

    def __init__(self, transformer: nn.Module, kinds: tuple[str, ...]) -> None:
        super().__init__()
        self.transformer = transformer
        self.output_names = kinds
        self.eval()

    def forward(self, *inputs: Tensor) -> tuple[Tensor, ...]:
        input_ids, attention_mask, window_text, text_index = inputs
        states = layer_states(self.transformer, input_ids, attention_mask)  # one pass for all
        return tuple(
            layer_vectors(states, attention_mask, window_text, text_index, kind)
            for kind in self.output_names
        )


class LayerHeadGraph(nn.Module):
    """One member's head over the shared backbone's vectors: ``layers`` ``(texts, layers,
    hidden)`` (of the kind it reads), and a stacked model's token ``INPUTS`` after them ->
    ``scores`` ``(texts, num_outputs)``, as :class:`LayerTextGraph` computes them."""

    output_names = ("scores",)

    def __init__(self, head: LayerPoolingModel) -> None:
        super().__init__()
        self.head = head
        self.eval()

    def forward(self, layers: Tensor, *tokens: Tensor) -> Tensor:
        words = None if self.head.words is None else pooled_reading(self.head.words, tokens)
        return self.head.outputs_with(layers, words)
