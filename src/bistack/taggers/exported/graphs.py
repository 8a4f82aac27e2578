"""A tagger's inference as one traceable module, for ONNX export: inputs -> ``tags`` ``(batch,
seq)`` int64 (the CRF's constrained Viterbi decode inside the graph, an ONNX ``Loop``, so the
graph alone tags) and ``emissions`` ``(batch, seq, num_tags)``, from which the runtime computes
confidences and k-best analyses with the same code as PyTorch
(``bistack.taggers.emissions.decoding``).

The Viterbi decode is TorchScript, so its loops over positions become ONNX ``Loop`` nodes whose
trip count is the batch's width (the compiled CPU kernel cannot be exported).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from bistack.data.word_rows import flat_word_index
from bistack.masking import lengths_to_mask
from bistack.models.graphs import token_vectors

if TYPE_CHECKING:
    from bistack.taggers.networks.heads import CRFHead, SoftmaxHead
    from bistack.taggers.networks.layer_network import LayerTagger
    from bistack.taggers.networks.network import SequenceTagger

TAGGER_OUTPUTS = ("tags", "emissions")
OUTPUT_AXES = {"tags": {0: "batch", 1: "seq"}, "emissions": {0: "batch", 1: "seq"}}


def viterbi_tags(
    emissions: Tensor, lengths: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> Tensor:
    """Best tag path ``(batch, seq)`` of ``emissions`` ``(batch, seq, num_tags)``, 0 at padding.

    Viterbi's recurrence, written for TorchScript (the graph an export traces): steps run over
    padding too, each sequence's final score is read at its own last position, and its
    backtrace starts there.
    """
    batch_size = emissions.size(0)
    seq_len = emissions.size(1)
    score = start + emissions[:, 0]  # (batch, num_tags)
    scores = [score]
    history = [torch.zeros_like(score, dtype=torch.long)]  # position 0 has no predecessor
    for t in range(1, seq_len):
        best, index = (score.unsqueeze(2) + transitions).max(dim=1)  # over the previous tag
        score = best + emissions[:, t]
        scores.append(score)
        history.append(index)
    last = lengths - 1
    rows = torch.arange(batch_size, device=emissions.device)
    final = torch.stack(scores, dim=1)[rows, last] + end  # (batch, num_tags)
    best_last = final.argmax(dim=1)
    pointers = torch.stack(history, dim=1)  # (batch, seq, num_tags)
    tags = torch.zeros(batch_size, seq_len, dtype=torch.long, device=emissions.device)
    current = best_last
    for step in range(seq_len):
        t = seq_len - 1 - step
        current = torch.where(last == t, best_last, current)
        tags[:, t] = current
        current = pointers[:, t].gather(1, current.unsqueeze(1)).squeeze(1)
    mask = torch.arange(seq_len, device=emissions.device).unsqueeze(0) < lengths.unsqueeze(1)
    return tags * mask


@functools.cache
def scripted_viterbi() -> Any:
    """:func:`viterbi_tags` compiled by TorchScript, once, on first export (TorchScript is
    deprecated for everything but this exporter, and says so when used)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(viterbi_tags)


def tags_and_emissions(
    head: SoftmaxHead | CRFHead, states: Tensor, lengths: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """A tagging head over encoder ``states`` ``(batch, seq, hidden)``: its best tags (the
    CRF's constrained Viterbi path, or a softmax head's best tag per token; 0 at padding) and
    its emissions ``(batch, seq, num_tags)``."""
    emissions = head.emissions(states)
    if head.crf is None:  # a softmax head: the best tag of each token
        return emissions.argmax(dim=-1) * mask, emissions
    transitions, start, end = (score.detach() for score in head.crf.constrained_scores())
    return scripted_viterbi()(emissions, lengths, transitions, start, end), emissions


class TaggerGraph(nn.Module):
    """A recurrent tagger's inference: ``INPUTS`` -> ``tags`` ``(batch, seq)`` int64, 0 at
    padding, and ``emissions`` ``(batch, seq, num_tags)``."""

    output_names = TAGGER_OUTPUTS

    def __init__(self, network: SequenceTagger) -> None:
        super().__init__()
        self.network = network
        self.eval()  # the exporter restores this mode after tracing: it must be inference

    def forward(self, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        lengths = inputs[-1]
        mask = lengths_to_mask(lengths, inputs[0].size(1))
        network = self.network
        states = network.encoder(token_vectors(network.embedder, inputs), mask=mask).states
        return tags_and_emissions(network.head, states, lengths, mask)


# A tagger over a transformer reads a batch's words as subword rows, as ``tokenize_words``
# makes them: input_ids, attention_mask ``(rows, pieces)`` (a sentence longer than the model's
# limit has several rows); subword_word ``(rows * pieces,)`` the word, numbered over the batch,
# each subword belongs to (-1 for special tokens and padding); first_subword, last_subword
# ``(words,)`` each word's first and last subword in that flat numbering; word_index ``(batch,
# seq)`` each sentence's words in the batch's numbering (0 at padding). A tagger that stacks the
# words' own features reads ``INPUTS`` after these; one that does not reads only their lengths.

WORD_DYNAMIC_AXES = {
    "input_ids": {0: "rows", 1: "pieces"},
    "attention_mask": {0: "rows", 1: "pieces"},
    "subword_word": {0: "subwords"},
    "first_subword": {0: "words"},
    "last_subword": {0: "words"},
    "word_index": {0: "batch", 1: "seq"},
    "lengths": {0: "batch"},
}


def word_inputs(pieces: Any) -> tuple[Tensor, ...]:
    """``WORD_INPUTS`` of a ``WordPieces`` (``bistack.models.word_pieces.tokenize_words``)."""
    return (
        pieces.input_ids,
        pieces.attention_mask,
        pieces.subword_word,
        pieces.first_subword,
        pieces.last_subword,
        torch.from_numpy(flat_word_index(pieces.lengths)),
    )


def word_states(transformer: nn.Module, alignment: str, *inputs: Tensor) -> Tensor:
    """Every word's state in every layer ``(words, num_layers, hidden_size)`` from the first
    five ``WORD_INPUTS``: its first subword's or last subword's (a ``Gather``), or the mean of
    its subwords' (a ``(words, subwords)`` 0/1 matrix product, as ``LayerTextGraph`` sums
    windows, in place of ``index_add_``)."""
    input_ids, attention_mask, subword_word, first_subword, last_subword = inputs
    output = transformer(
        input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
    )
    states = torch.stack(output.hidden_states[1:], dim=2)  # (rows, pieces, layers, hidden)
    flat = states.flatten(0, 1)  # (rows * pieces, layers, hidden)
    if alignment == "first":
        return flat[first_subword]
    if alignment == "last":
        return flat[last_subword]
    words = torch.arange(first_subword.size(0), device=flat.device)
    belongs = (words.unsqueeze(1) == subword_word.unsqueeze(0)).to(flat.dtype)
    sums = (belongs @ flat.flatten(1)).view(-1, flat.size(1), flat.size(2))
    return sums / belongs.sum(dim=1)[:, None, None]


def tagger_outputs(
    network: LayerTagger, words: Tensor, inputs: Sequence[Tensor]
) -> tuple[Tensor, Tensor]:
    """The tagger's own modules over the batch's flat word states ``words``: ``inputs`` are
    ``word_index`` ``(batch, seq)``, then the words' own features (``INPUTS``) or their
    ``lengths``: the layer mix, the stacked features, the encoder, the head and the CRF
    decode of ``TaggerGraph``."""
    word_index, lengths = inputs[0], inputs[-1]
    mask = lengths_to_mask(lengths, word_index.size(1))
    layers = words[word_index]  # (batch, seq, layers, hidden)
    mixed = network.mix(layers.flatten(0, 1)).view(word_index.size(0), word_index.size(1), -1)
    if network.embedder is not None:
        mixed = torch.cat([mixed, token_vectors(network.embedder, tuple(inputs[1:]))], dim=-1)
    states = network.encoder(mixed, mask=mask).states
    return tags_and_emissions(network.head, states, lengths, mask)


class LayerTaggerGraph(nn.Module):
    """A tagger over a transformer's word states, alone or stacked with the words' own
    features: ``WORD_INPUTS`` (+ ``INPUTS``, or ``lengths``) -> ``tags`` ``(batch, seq)``, 0 at
    padding, and ``emissions`` ``(batch, seq, num_tags)``: :func:`word_states`, then
    :func:`tagger_outputs`."""

    output_names = TAGGER_OUTPUTS

    def __init__(self, transformer: nn.Module, network: LayerTagger) -> None:
        super().__init__()
        self.transformer = transformer
        self.network = network
        self.eval()  # the exporter restores this mode after tracing: it must be inference

    def forward(self, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        words = word_states(self.transformer, self.network.alignment, *inputs[:5])
        return tagger_outputs(self.network, words, inputs[5:])


class WordStatesGraph(nn.Module):
    """The frozen backbone the members of an exported tagger ensemble share: the first five
    ``WORD_INPUTS`` -> ``word_states`` ``(words, num_layers, hidden_size)``, run once a batch
    for every member."""

    output_names = ("word_states",)

    def __init__(self, transformer: nn.Module, alignment: str) -> None:
        super().__init__()
        self.transformer = transformer
        self.alignment = alignment
        self.eval()

    def forward(self, *inputs: Tensor) -> Tensor:
        return word_states(self.transformer, self.alignment, *inputs)


class LayerTaggerHeadGraph(nn.Module):
    """One member's tagger over the shared backbone's word states: ``word_states``,
    ``word_index`` and the words' own features (``INPUTS``) or ``lengths`` -> ``tags`` and
    ``emissions``, as :class:`LayerTaggerGraph` computes them."""

    output_names = TAGGER_OUTPUTS

    def __init__(self, network: LayerTagger) -> None:
        super().__init__()
        self.network = network
        self.eval()

    def forward(self, words: Tensor, *inputs: Tensor) -> tuple[Tensor, Tensor]:
        return tagger_outputs(self.network, words, inputs)
