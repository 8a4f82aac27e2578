"""A tagger over a transformer's word-level layer states, alone or stacked with its own features.

Each word's state in every layer ``(num_layers, hidden_size)`` (its first subword's, the mean
of its subwords', or its last subword's) -> one vector per word (a learned softmax mix of the
layers, ScalarMix, or a BiLSTM over them) -> optionally concatenated with the word's own
features (word embedding, casing, characters: what an uncased transformer cannot see), each
part dropped per token with its own rate -> dropout -> the recurrent encoder -> a softmax or CRF
head, as in the recurrent tagger. Stacking representations this way is Flair's
``StackedEmbeddings`` (Akbik et al. 2018).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor, nn

from bistack.data.batching import TokenBatch
from bistack.data.features import TokenVocabularies
from bistack.dropout import Dropout, part_dropout
from bistack.encoders import SequenceEncoder
from bistack.errors import ConfigError
from bistack.layer_pooling import LayerPooler, build_layer_pooler
from bistack.models.backbone import TransformerBackbone
from bistack.models.backbone_training import backbone_parameter_groups, trained_backbone
from bistack.models.builders import build_embedder, build_encoder
from bistack.models.embeddings import TokenEmbedder
from bistack.models.frozen_pass import FrozenPass
from bistack.models.word_pieces import WordPieces, word_layer_states
from bistack.taggers.boundary import BottomWords
from bistack.taggers.config import LayerPoolingTaggerConfig
from bistack.taggers.networks.heads import CRFHead, SoftmaxHead, build_tagging_head
from bistack.transfer import to_device


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class WordLayerBatch:
    """Sentences as word states or as subwords.

    layers: ``(batch_size, seq_len, num_layers, hidden_size)`` cached word states, or None when
    ``pieces`` (subwords for a fine-tuned backbone) or ``bottom`` (a top-K tagger's cached
    bottom, :class:`bistack.taggers.boundary.BottomWords`) are given; mask: ``(batch_size,
    seq_len)`` True at real words; lengths: ``(batch_size,)`` the words of each sentence, kept
    on the host (packing orders a batch there); tags: ``(batch_size, seq_len)`` tag ids or
    None; tokens: the words' own features, for a tagger that stacks them beside the
    transformer's states.
    """

    HOST_FIELDS: ClassVar[frozenset[str]] = frozenset({"lengths"})

    mask: Tensor
    lengths: Tensor
    layers: Tensor | None = None
    pieces: WordPieces | None = None
    tags: Tensor | None = None
    tokens: TokenBatch | None = None
    bottom: BottomWords | None = None

    @classmethod
    def of_lengths(cls, lengths: Sequence[int], **parts: Any) -> WordLayerBatch:
        """A batch of sentences of ``lengths`` words, its mask made from them, with ``parts``."""
        host = torch.tensor(list(lengths))
        return cls(torch.arange(max(lengths))[None, :] < host[:, None], host, **parts)

    def to(self, device: torch.device | str) -> WordLayerBatch:
        return WordLayerBatch(
            to_device(self.mask, device),
            self.lengths,
            None if self.layers is None else to_device(self.layers, device),
            None if self.pieces is None else self.pieces.to(device),
            None if self.tags is None else to_device(self.tags, device),
            None if self.tokens is None else self.tokens.to(device),
            None if self.bottom is None else self.bottom.to(device),
        )


def pad_words(words: Tensor, lengths: list[int]) -> Tensor:
    """Flat word states ``(total_words, ...)`` -> ``(len(lengths), max(lengths), ...)``."""
    padded = words.new_zeros((len(lengths), max(lengths), *words.shape[1:]))
    start = 0
    for row, length in enumerate(lengths):
        padded[row, :length] = words[start : start + length]
        start += length
    return padded


class LayerTagger(nn.Module):
    """Layer mix per word (⊕ the word's own features) + recurrent encoder + tagging head; a
    fine-tuned backbone inside.

    ``mix`` maps ``(words, num_layers, hidden_size)`` to ``(words, mix.output_size)``;
    ``embedder``: the stacked token features, or None; ``part_dropout``: per-token dropout rate
    of each stacked part, by name (``transformer``, ``words``, ``casing``, ``chars``).
    """

    def __init__(
        self,
        mix: LayerPooler,
        encoder: SequenceEncoder,
        head: SoftmaxHead | CRFHead,
        dropout: float,
        *,
        alignment: Literal["first", "mean", "last"],
        backbone: TransformerBackbone | None = None,
        backbone_lr: float = 2e-5,
        layer_lr_decay: float = 1.0,
        embedder: TokenEmbedder | None = None,
        part_dropout: dict[str, float] | None = None,
        split: tuple[int, FrozenPass] | None = None,
    ) -> None:
        super().__init__()
        # A top-K tagger's whole pass at prediction: its bottom (to this boundary) in this
        # pass's precision, its top in float32, as training read them.
        self.split = split
        self.mix = mix
        self.embedder = embedder
        self.encoder = encoder
        self.head = head
        self.dropout = Dropout(dropout)
        self.part_dropout = dict(part_dropout or {})
        self.alignment = alignment
        self.backbone = backbone
        self.backbone_lr = backbone_lr
        self.layer_lr_decay = layer_lr_decay

    def parameter_groups(self, lr: float) -> list[dict]:
        """The tagger at ``lr``; a fine-tuned backbone at its own rate."""
        own = [p for name, p in self.named_parameters() if not name.startswith("backbone.")]
        groups: list[dict] = [{"params": own, "lr": lr}]
        if self.backbone is not None:
            groups += backbone_parameter_groups(
                self.backbone, self.backbone_lr, self.layer_lr_decay
            )
        return groups

    def word_layers(self, batch: WordLayerBatch) -> Tensor:
        """``(batch_size, seq_len, num_layers, hidden_size)`` word states, float32."""
        if batch.layers is not None:
            return batch.layers.float()
        if self.backbone is not None and batch.bottom is not None:  # top K over a cached bottom
            words = batch.bottom.word_layers(self.backbone, self.alignment)
            return pad_words(words, batch.lengths.tolist())
        if self.backbone is None or batch.pieces is None:
            raise ValueError("a frozen-backbone tagger takes cached word states (layers)")
        if self.split is not None:
            boundary, frozen = self.split
            words = word_layer_states(self.backbone, batch.pieces, self.alignment, frozen, boundary)
        else:
            words = word_layer_states(self.backbone, batch.pieces, self.alignment)
        return pad_words(words, batch.pieces.lengths)

    def word_vectors(self, batch: WordLayerBatch) -> Tensor:
        """Each word's stacked vector ``(batch_size, seq_len, encoder input size)``, its parts
        dropped per token in training."""
        layers = self.word_layers(batch)
        batch_size, seq_len, num_layers, hidden = layers.shape
        mixed = self.mix(layers.reshape(-1, num_layers, hidden)).view(batch_size, seq_len, -1)
        parts = [("transformer", mixed)]
        if self.embedder is not None:
            if batch.tokens is None:
                raise ValueError("this tagger stacks the words' own features: give batch.tokens")
            parts += self.embedder.parts(batch.tokens)
        dropped = [part_dropout(v, self.part_dropout.get(n, 0.0), self.training) for n, v in parts]
        return torch.cat(dropped, dim=-1) if len(dropped) > 1 else dropped[0]

    def states(self, batch: WordLayerBatch) -> Tensor:
        """Encoder states ``(batch_size, seq_len, encoder.output_size)``."""
        vectors = self.dropout(self.word_vectors(batch))
        return self.dropout(self.encoder(vectors, lengths=batch.lengths, validate=False).states)

    def forward(self, batch: WordLayerBatch) -> Tensor:
        """Training loss per real word; padding never counts."""
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss from")
        return self.head.loss(self.states(batch), batch.tags, batch.mask)

    def emissions(self, batch: WordLayerBatch) -> Tensor:
        """Tag scores ``(batch, seq_len, num_tags)`` (what ``head.decoder()`` turns into tags,
        confidences and k-best analyses)."""
        return self.head.emissions(self.states(batch))


def build_layer_tagger(
    config: LayerPoolingTaggerConfig,
    num_layers: int,
    hidden_size: int,
    labels: list[str],
    backbone: TransformerBackbone | None = None,
    vocabularies: TokenVocabularies | None = None,
    singletons: Tensor | None = None,
) -> LayerTagger:
    """The tagger a config describes, for a backbone of ``num_layers`` x ``hidden_size``;
    ``vocabularies`` (and ``singletons``, see ``build_embedder``) when it stacks the words' own
    features (``config.features``)."""
    try:
        mix = build_layer_pooler(
            config.layer_mix.type,
            num_layers,
            hidden_size,
            lstm_hidden=config.layer_mix.lstm_hidden,
            dropout=0.0,
        )
    except ValueError as error:  # a mix the backbone cannot feed (too few layers)
        raise ConfigError(f"layer_mix.type: {error}") from None
    embedder = None
    if config.features is not None:
        if vocabularies is None:
            raise ValueError("a tagger that stacks token features needs their vocabularies")
        embedder = build_embedder(config.features, vocabularies, singletons)
    encoder = build_encoder(
        config.encoder, mix.output_size + (embedder.output_size if embedder is not None else 0)
    )
    return LayerTagger(
        mix,
        encoder,
        build_tagging_head(config.head, encoder.output_size, labels, config.data.scheme),
        config.encoder.outer_dropout,
        alignment=config.subwords,
        backbone=trained_backbone(backbone, config.backbone),
        backbone_lr=config.backbone.lr,
        layer_lr_decay=config.backbone.layer_lr_decay,
        embedder=embedder,
        part_dropout=config.part_dropout.rates(),
        split=split_pass(config, num_layers),
    )


def split_pass(config: LayerPoolingTaggerConfig, num_layers: int) -> tuple[int, FrozenPass] | None:
    """A top-K tagger's boundary and its bottom's pass, where that pass runs in bfloat16 (None:
    the whole encoder as it trains, in float32)."""
    top, frozen = config.backbone.top_layers, FrozenPass.of(config.backbone)
    if top is None or top >= num_layers or frozen.precision == "32":
        return None
    return num_layers - top, frozen
