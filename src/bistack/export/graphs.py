"""The numeric part of a trained model as one traceable module, for ONNX export.

Each graph takes the batch a ``TokenBatch`` holds, as int64 arrays (``INPUTS``), and returns what
a user needs, not intermediate scores: a tagger returns tag ids (the CRF's constrained Viterbi
decode runs inside the graph as an ONNX ``Loop``), a classifier class probabilities (its
temperature applied), a regressor values in original units (its calibration applied).

The graphs reuse the trained modules and their weights; only what cannot be traced is done
differently, with the same result:

- the char BiLSTM runs over all of a batch's words at once instead of in length groups (a
  group's width would be frozen into the graph as a constant);
- the Viterbi decode is TorchScript, so its loops over positions become ONNX ``Loop`` nodes
  whose trip count is the batch's width (the compiled CPU kernel cannot be exported).

The encoder needs no change: each direction is one fused LSTM/GRU call (an ONNX ``LSTM``/``GRU``
node), or for the minGRU/minLSTM cells a scripted loop over positions (``bistack.min_cells``),
and the backward direction reads each sequence reversed within its own length (a ``Gather``), so
padding is never read, whatever the batch's width.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch
from torch import Tensor, nn

from bistack.data.features import TokenVocabularies, token_rows
from bistack.data.word_rows import flat_word_index
from bistack.masking import lengths_to_mask
from bistack.models.embeddings import CharLSTMEncoder, TokenEmbedder

# The graph's inputs, as collate_tokens builds them: words, casing, char_index ``(batch, seq)``,
# chars ``(unique_words, max_chars)``, char_lengths ``(unique_words,)``, lengths ``(batch,)``.
INPUTS = ("words", "casing", "chars", "char_lengths", "char_index", "lengths")
DYNAMIC_AXES = {
    "words": {0: "batch", 1: "seq"},
    "casing": {0: "batch", 1: "seq"},
    "chars": {0: "unique_words", 1: "max_chars"},
    "char_lengths": {0: "unique_words"},
    "char_index": {0: "batch", 1: "seq"},
    "lengths": {0: "batch"},
}


def example_tokens(vocabularies: TokenVocabularies, lengths: list[int]) -> tuple[Tensor, ...]:
    """A batch of sentences of ``lengths`` made of the vocabulary's own words, as the graph's
    ``INPUTS`` (see ``example_sentences``)."""
    return token_inputs(vocabularies, example_sentences(vocabulary_words(vocabularies), lengths))


def vocabulary_words(vocabularies: TokenVocabularies) -> list[str]:
    """The vocabulary's own words, or one word when it has none."""
    return [w for w in vocabularies.words.items[2:] if w] or ["word"]


def example_sentences(words: list[str], lengths: list[int]) -> list[list[str]]:
    """Sentences of ``lengths`` made of ``words``, each row starting elsewhere in the list; the
    last sentence's last word is spelled with a character no vocabulary has."""
    sentences = [
        [words[(row * 7 + i) % len(words)] for i in range(n)] for row, n in enumerate(lengths)
    ]
    sentences[-1][-1] += "\u2603"
    return sentences


def token_inputs(vocabularies: TokenVocabularies, sentences: list[list[str]]) -> tuple[Tensor, ...]:
    """Token lists as the graph's ``INPUTS``, as ``collate_tokens`` builds them."""
    rows = token_rows([vocabularies.encode(tokens) for tokens in sentences], vocabularies)
    arrays = (rows.words, rows.casing, rows.chars, rows.char_lengths, rows.char_index)
    return (*(torch.tensor(a) for a in arrays), torch.tensor(rows.lengths))


def viterbi_tags(
    emissions: Tensor, lengths: Tensor, transitions: Tensor, start: Tensor, end: Tensor
) -> Tensor:
    """Best tag path ``(batch, seq)`` of ``emissions`` ``(batch, seq, num_tags)``, 0 at padding.

    The same recurrence as ``CRF._viterbi_best_tensor``, written for TorchScript: steps run over
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


def token_vectors(embedder: TokenEmbedder, inputs: tuple[Tensor, ...]) -> Tensor:
    """``TokenEmbedder.forward`` in inference, char words in one group ->
    ``(batch, seq, embedder.output_size)``."""
    words, casing, chars, char_lengths, char_index, _ = inputs
    parts = [] if embedder.word_embedding is None else [embedder.word_embedding(words)]
    if embedder.casing_embedding is not None:
        parts.append(embedder.casing_embedding(casing))
    encoder = embedder.char_encoder
    if isinstance(encoder, CharLSTMEncoder):
        spelled = encoder.embedding(chars)
        parts.append(encoder.encoder(spelled, lengths=char_lengths).summary[char_index])
    elif encoder is not None:  # the char CNN has no data-dependent shapes
        parts.append(encoder(chars, char_lengths)[char_index])
    return torch.cat(parts, dim=-1)


def best_tags(head: nn.Module, states: Tensor, lengths: Tensor, mask: Tensor) -> Tensor:
    """A tagging head's decode of encoder ``states`` ``(batch, seq, hidden)``: the CRF's
    constrained Viterbi path, or a softmax head's best tag per token; 0 at padding."""
    emissions = head.project(states)  # (batch, seq, num_tags)
    crf = getattr(head, "crf", None)
    if crf is None:  # a softmax head: the best tag of each token
        return emissions.argmax(dim=-1) * mask
    transitions, start, end = (score.detach() for score in crf.constrained_scores())
    return scripted_viterbi()(emissions, lengths, transitions, start, end)


class TaggerGraph(nn.Module):
    """A recurrent tagger's inference: inputs -> ``tags`` ``(batch, seq)`` int64, 0 at padding."""

    output_names = ("tags",)

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network
        self.eval()  # the exporter restores this mode after tracing: it must be inference

    def forward(self, *inputs: Tensor) -> Tensor:
        lengths = inputs[-1]
        mask = lengths_to_mask(lengths, inputs[0].size(1))
        network = self.network
        states = network.encoder(token_vectors(network.embedder, inputs), mask=mask).states
        return best_tags(network.head, states, lengths, mask)


class TextGraph(nn.Module):
    """A recurrent text model's inference: inputs -> ``outputs`` ``(batch, num_outputs)`` (class
    probabilities, or values in original units) and, when the pooling attends, ``attention``
    ``(batch, seq)``, exactly 0 at padding.

    ``attends``: whether the pooling attends (its weights become an output);
    ``temperature``: logits are divided by it before the softmax (classifiers); ``affine``:
    ``(mean, std, scale, offset)`` per output, values ``(raw * std + mean) * scale + offset``
    (regressors).
    """

    def __init__(
        self,
        network: nn.Module,
        *,
        attends: bool,
        temperature: float | None = None,
        affine: tuple[list[float], list[float], list[float], list[float]] | None = None,
    ) -> None:
        super().__init__()
        self.network = network
        self.eval()  # the exporter restores this mode after tracing: it must be inference
        self.temperature = temperature
        self.affine = None if affine is None else [torch.tensor(values) for values in affine]
        self.attends = attends

    @property
    def output_names(self) -> tuple[str, ...]:
        return ("outputs", "attention") if self.attends else ("outputs",)

    def forward(self, *inputs: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        lengths = inputs[-1]
        mask = lengths_to_mask(lengths, inputs[0].size(1))
        network = self.network
        states = network.encoder(token_vectors(network.embedder, inputs), mask=mask).states
        pooled = network.pooling(states, mask)
        raw = network.head(pooled.vector)  # (batch, num_outputs)
        if self.affine is None:
            outputs = torch.softmax(raw / (self.temperature or 1.0), dim=-1)
        else:
            mean, std, scale, offset = self.affine
            outputs = (raw * std + mean) * scale + offset
        if self.attends:
            return outputs, pooled.weights
        return outputs


# A model over a transformer reads subword windows: input_ids, attention_mask ``(windows,
# seq)``, window_text ``(windows,)`` the text each window belongs to, and text_index
# ``(texts,)`` = 0..texts-1 (a text cut into several windows has several rows).
LAYER_INPUTS = ("input_ids", "attention_mask", "window_text", "text_index")
LAYER_DYNAMIC_AXES = {
    "input_ids": {0: "windows", 1: "seq"},
    "attention_mask": {0: "windows", 1: "seq"},
    "window_text": {0: "windows"},
    "text_index": {0: "texts"},
}


def example_texts(variant: int) -> list[str]:
    """Texts of several lengths; variant 1 has other lengths and a text longer than a window."""
    return [["a short text", "the second text is rather longer than the first one", "x"],
            ["one", "two words", "many " * 600]][variant]  # fmt: skip


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


def pooled_reading(branch: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
    """A stacked model's word branch (``WordBranch``) in inference over ``INPUTS``, char words
    in one group -> ``(batch, branch.output_size)``."""
    lengths = inputs[-1]
    mask = lengths_to_mask(lengths, inputs[0].size(1))
    states = branch.encoder(token_vectors(branch.embedder, inputs), mask=mask).states
    return branch.pooling(states, mask).vector


class LayerTextGraph(nn.Module):
    """A classifier or regressor over a transformer's layers: subword windows -> every layer's
    CLS or mean vector per text (the mean over its windows, as ``TransformerBackbone.forward``
    takes it) -> the layer pooling head -> ``outputs`` ``(texts, num_outputs)``: probabilities
    (``temperature`` applied) or values in original units (``affine`` as in ``TextGraph``). A
    model that stacks the texts' own features reads their ``INPUTS`` after ``LAYER_INPUTS``
    and joins its word branch's vector to the pooled layers, as in training.

    Windows are summed into texts by a ``(texts, windows)`` 0/1 matrix product rather than
    ``index_add_``: the same sums, in plain MatMul nodes.
    """

    output_names = ("outputs",)

    def __init__(
        self,
        transformer: nn.Module,
        head: nn.Module,
        *,
        temperature: float | None = None,
        affine: tuple[list[float], list[float], list[float], list[float]] | None = None,
    ) -> None:
        super().__init__()
        self.transformer = transformer
        self.head = head
        self.temperature = temperature
        self.affine = None if affine is None else [torch.tensor(values) for values in affine]
        self.eval()  # the exporter restores this mode after tracing: it must be inference

    def forward(self, *inputs: Tensor) -> Tensor:
        input_ids, attention_mask, window_text, text_index = inputs[:4]
        output = self.transformer(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
        )
        states = torch.stack(output.hidden_states[1:], dim=1)  # (windows, layers, seq, hidden)
        mask = attention_mask.to(states.dtype)
        belongs = (text_index.unsqueeze(1) == window_text.unsqueeze(0)).to(states.dtype)
        if self.head.features == "cls":
            sums = torch.einsum("tw,wlh->tlh", belongs, states[:, :, 0])
            layers = sums / belongs.sum(dim=1)[:, None, None]
        else:
            token_sums = torch.einsum("wlsh,ws->wlh", states, mask)
            sums = torch.einsum("tw,wlh->tlh", belongs, token_sums)
            layers = sums / (belongs @ mask.sum(dim=1))[:, None, None]
        words = None if self.head.words is None else pooled_reading(self.head.words, inputs[4:])
        raw = self.head.outputs_with(layers, words)  # (texts, num_outputs)
        if self.affine is None:
            return torch.softmax(raw / (self.temperature or 1.0), dim=-1)
        mean, std, scale, offset = self.affine
        return (raw * std + mean) * scale + offset


# A tagger over a transformer reads a batch's words as subword rows, as ``tokenize_words``
# makes them: input_ids, attention_mask ``(rows, pieces)`` (a sentence longer than the model's
# limit has several rows); subword_word ``(rows * pieces,)`` the word, numbered over the batch,
# each subword belongs to (-1 for special tokens and padding); first_subword, last_subword
# ``(words,)`` each word's first and last subword in that flat numbering; word_index ``(batch,
# seq)`` each sentence's words in the batch's numbering (0 at padding). A tagger that stacks the
# words' own features reads ``INPUTS`` after these; one that does not reads only their lengths.
WORD_INPUTS = (
    "input_ids",
    "attention_mask",
    "subword_word",
    "first_subword",
    "last_subword",
    "word_index",
)
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
    """``WORD_INPUTS`` of a ``WordPieces`` (``bistack.models.backbone.tokenize_words``)."""
    return (
        pieces.input_ids,
        pieces.attention_mask,
        pieces.subword_word,
        pieces.first_subword,
        pieces.last_subword,
        torch.from_numpy(flat_word_index(pieces.lengths)),
    )


class LayerTaggerGraph(nn.Module):
    """A tagger over a transformer's word states, alone or stacked with the words' own
    features: ``WORD_INPUTS`` (+ ``INPUTS``, or ``lengths``) -> ``tags`` ``(batch, seq)``, 0 at
    padding.

    Every word's state in every layer is its first subword's or last subword's (a ``Gather``),
    or the mean of its subwords' (a ``(words, subwords)`` 0/1 matrix product, as
    ``LayerTextGraph`` sums windows, in place of ``index_add_``); the rest is the trained
    tagger's own modules: the layer mix, the stacked features, the encoder, the head and the
    CRF decode of ``TaggerGraph``.
    """

    output_names = ("tags",)

    def __init__(self, transformer: nn.Module, network: nn.Module) -> None:
        super().__init__()
        self.transformer = transformer
        self.network = network
        self.eval()  # the exporter restores this mode after tracing: it must be inference

    def word_states(self, *inputs: Tensor) -> Tensor:
        """Every word's state in every layer ``(words, num_layers, hidden_size)``."""
        input_ids, attention_mask, subword_word, first_subword, last_subword = inputs
        output = self.transformer(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
        )
        states = torch.stack(output.hidden_states[1:], dim=2)  # (rows, pieces, layers, hidden)
        flat = states.flatten(0, 1)  # (rows * pieces, layers, hidden)
        alignment = self.network.alignment
        if alignment == "first":
            return flat[first_subword]
        if alignment == "last":
            return flat[last_subword]
        words = torch.arange(first_subword.size(0), device=flat.device)
        belongs = (words.unsqueeze(1) == subword_word.unsqueeze(0)).to(flat.dtype)
        sums = (belongs @ flat.flatten(1)).view(-1, flat.size(1), flat.size(2))
        return sums / belongs.sum(dim=1)[:, None, None]

    def forward(self, *inputs: Tensor) -> Tensor:
        word_index, lengths = inputs[5], inputs[-1]
        mask = lengths_to_mask(lengths, word_index.size(1))
        network = self.network
        layers = self.word_states(*inputs[:5])[word_index]  # (batch, seq, layers, hidden)
        mixed = network.mix(layers.flatten(0, 1)).view(word_index.size(0), word_index.size(1), -1)
        if network.embedder is not None:
            mixed = torch.cat([mixed, token_vectors(network.embedder, inputs[6:])], dim=-1)
        states = network.encoder(mixed, mask=mask).states
        return best_tags(network.head, states, lengths, mask)
