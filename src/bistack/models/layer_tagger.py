"""A tagger over a transformer's word-level layer states.

Each word's state in every layer ``(num_layers, hidden_size)`` (its first subword's, or the
mean of its subwords') -> a learned softmax mix of the layers (ScalarMix, the same for every
word) -> dropout -> the recurrent encoder -> a softmax or CRF head, as in the recurrent tagger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from bistack.analysis import Analysis
from bistack.config import LayerPoolingTaggerConfig
from bistack.dropout import Dropout
from bistack.encoders import SequenceEncoder
from bistack.layer_pooling import WeightedLayerPooling
from bistack.models.backbone import TransformerBackbone, WordPieces, word_layer_states
from bistack.models.builders import build_encoder
from bistack.models.heads import CRFHead, SoftmaxHead, build_tagging_head


@dataclass(frozen=True)
class WordLayerBatch:
    """Sentences as word states or as subwords.

    layers: ``(batch_size, seq_len, num_layers, hidden_size)`` cached word states, or None when
    ``pieces`` (subwords for a fine-tuned backbone) are given; mask: ``(batch_size, seq_len)``
    True at real words; tags: ``(batch_size, seq_len)`` tag ids or None.
    """

    mask: Tensor
    layers: Tensor | None = None
    pieces: WordPieces | None = None
    tags: Tensor | None = None

    def to(self, device: torch.device | str) -> WordLayerBatch:
        return WordLayerBatch(
            self.mask.to(device),
            None if self.layers is None else self.layers.to(device),
            None if self.pieces is None else self.pieces.to(device),
            None if self.tags is None else self.tags.to(device),
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
    """Layer mix per word + recurrent encoder + tagging head; a fine-tuned backbone inside."""

    def __init__(
        self,
        mix: WeightedLayerPooling,
        encoder: SequenceEncoder,
        head: SoftmaxHead | CRFHead,
        dropout: float,
        *,
        alignment: Literal["first", "mean"],
        backbone: TransformerBackbone | None = None,
        backbone_lr: float = 2e-5,
    ) -> None:
        super().__init__()
        self.mix = mix
        self.encoder = encoder
        self.head = head
        self.dropout = Dropout(dropout)
        self.alignment = alignment
        self.backbone = backbone
        self.backbone_lr = backbone_lr

    def parameter_groups(self, lr: float) -> list[dict]:
        """The tagger at ``lr``; a fine-tuned backbone at its own rate."""
        own = [p for name, p in self.named_parameters() if not name.startswith("backbone.")]
        groups: list[dict] = [{"params": own, "lr": lr}]
        if self.backbone is not None:
            groups.append({"params": list(self.backbone.parameters()), "lr": self.backbone_lr})
        return groups

    def word_layers(self, batch: WordLayerBatch) -> Tensor:
        """``(batch_size, seq_len, num_layers, hidden_size)`` word states, float32."""
        if batch.layers is not None:
            return batch.layers.float()
        if self.backbone is None or batch.pieces is None:
            raise ValueError("a frozen-backbone tagger takes cached word states (layers)")
        words = word_layer_states(self.backbone, batch.pieces, self.alignment)
        return pad_words(words, batch.pieces.lengths)

    def states(self, batch: WordLayerBatch) -> Tensor:
        """Encoder states ``(batch_size, seq_len, encoder.output_size)``."""
        layers = self.word_layers(batch)
        batch_size, seq_len, num_layers, hidden = layers.shape
        mixed = self.mix(layers.reshape(-1, num_layers, hidden)).view(batch_size, seq_len, hidden)
        return self.dropout(self.encoder(self.dropout(mixed), mask=batch.mask).states)

    def forward(self, batch: WordLayerBatch) -> Tensor:
        """Training loss per real word; padding never counts."""
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss from")
        return self.head.loss(self.states(batch), batch.tags, batch.mask)

    def decode(self, batch: WordLayerBatch) -> Tensor:
        """Predicted tag ids ``(batch_size, seq_len)``, 0 at padding."""
        return self.head.decode(self.states(batch), batch.mask)

    def analyse(self, batch: WordLayerBatch, top_k: int = 1) -> list[Analysis]:
        """Predicted tags with token and entity probabilities (and the ``top_k`` best
        analyses), per sentence."""
        return self.head.analyse(self.states(batch), batch.mask, top_k)


def build_layer_tagger(
    config: LayerPoolingTaggerConfig,
    num_layers: int,
    hidden_size: int,
    labels: list[str],
    backbone: TransformerBackbone | None = None,
) -> LayerTagger:
    """The tagger a config describes, for a backbone of ``num_layers`` x ``hidden_size``."""
    encoder = build_encoder(config.encoder, hidden_size)
    return LayerTagger(
        WeightedLayerPooling(num_layers, hidden_size),
        encoder,
        build_tagging_head(config.head, encoder.output_size, labels, config.data.scheme),
        config.encoder.outer_dropout,
        alignment=config.subwords,
        backbone=backbone if config.backbone.finetune else None,
        backbone_lr=config.backbone.lr,
    )
