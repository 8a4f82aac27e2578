"""A classifier or regressor head that pools over a transformer's layers.

Per-layer vectors ``(batch_size, num_layers, hidden_size)`` (from the feature cache when the
backbone is frozen, or from the backbone itself when it is fine-tuned) -> the selected layers ->
a layer pooler -> dropout -> one linear layer (class logits, or standardised targets).

Stacked, the text's own reading by a recurrent text model (token features -> encoder -> pooling,
:class:`WordBranch`) is concatenated with the pooled layers before the linear layer: what an
uncased transformer cannot see (casing, spelling) and words it splits oddly reach the head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from bistack.data.batching import TokenBatch
from bistack.data.features import TokenVocabularies
from bistack.dropout import Dropout, part_dropout
from bistack.encoders import SequenceEncoder
from bistack.layer_pooling import (
    LayerPooler,
    RecurrentLayerPooling,
    build_layer_pooler,
    pooler_features,
    select_layers,
)
from bistack.models.backbone import (
    SubwordBatch,
    TransformerBackbone,
)
from bistack.models.backbone_training import backbone_parameter_groups, trained_backbone
from bistack.models.boundary import BoundaryBatch, SplitPass, boundary_layers
from bistack.models.builders import build_embedder, build_encoder
from bistack.models.embeddings import TokenEmbedder
from bistack.models.frozen_pass import FrozenPass
from bistack.text_models.config import LayerPoolingTextConfig
from bistack.text_models.network import LOSSES, build_text_pooling
from bistack.transfer import to_device


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class LayerBatch:
    """layers: ``(batch_size, num_layers, hidden_size)`` every layer's vector (1..N);
    targets: ``(batch_size,)`` class ids, ``(batch_size, num_targets)`` floats, or None;
    tokens: the texts' own token features, for a model that stacks them."""

    layers: Tensor
    targets: Tensor | None = None
    tokens: TokenBatch | None = None

    def to(self, device: torch.device | str) -> LayerBatch:
        targets = None if self.targets is None else to_device(self.targets, device)
        tokens = None if self.tokens is None else self.tokens.to(device)
        return LayerBatch(to_device(self.layers, device), targets, tokens)


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class StackedSubwords:
    """A fine-tuned stacked model's batch: the texts' subwords, and their token features."""

    subwords: SubwordBatch
    tokens: TokenBatch

    @property
    def targets(self) -> Tensor | None:
        return self.subwords.targets

    def to(self, device: torch.device | str) -> StackedSubwords:
        return StackedSubwords(self.subwords.to(device), self.tokens.to(device))


class WordBranch(nn.Module):
    """A text read as a recurrent text model reads it: token features (each part dropped per
    token at its ``part_dropout`` rate) -> dropout -> encoder -> pooling -> dropout ->
    ``(batch_size, encoder.output_size)``."""

    def __init__(
        self,
        embedder: TokenEmbedder,
        encoder: SequenceEncoder,
        pooling: nn.Module,
        dropout: float,
        part_dropout: dict[str, float],
    ) -> None:
        super().__init__()
        self.embedder = embedder
        self.encoder = encoder
        self.pooling = pooling
        self.dropout = Dropout(dropout)
        self.part_dropout = part_dropout
        self.output_size = encoder.output_size

    def forward(self, tokens: TokenBatch) -> Tensor:
        parts = [
            part_dropout(vectors, self.part_dropout.get(name, 0.0), self.training)
            for name, vectors in self.embedder.parts(tokens)
        ]
        inputs = self.dropout(torch.cat(parts, dim=-1))
        states = self.encoder(inputs, lengths=tokens.lengths, validate=False).states
        return self.dropout(self.pooling(states, tokens.mask, validate=False).vector)


# What a step or a prediction reads: cached per-layer vectors (frozen), subword windows (the
# whole encoder fine-tuned), a stacked model's windows and tokens, or the boundary states of
# a model whose top layers train over its cached bottom.
Batch = LayerBatch | SubwordBatch | StackedSubwords | BoundaryBatch


class LayerPoolingModel(nn.Module):
    """Layer pooler + linear head; with ``backbone`` set, the backbone is trained too."""

    layer_index: Tensor  # (selected layers,) the layers the pooler reads, 0-based

    def __init__(
        self,
        pooler: LayerPooler,
        layers: list[int],
        features: Literal["cls", "mean"],
        num_outputs: int,
        *,
        dropout: float,
        loss: str,
        backbone: TransformerBackbone | None = None,
        backbone_lr: float = 2e-5,
        layer_lr_decay: float = 1.0,
        words: WordBranch | None = None,
        transformer_dropout: float = 0.0,
        split: SplitPass | None = None,
    ) -> None:
        super().__init__()
        self.split = split  # a top-K model's pass at prediction, its bottom in bfloat16
        self.pooler = pooler
        self.words = words
        self.transformer_dropout = transformer_dropout  # the pooled layers, dropped per text
        self.register_buffer("layer_index", torch.tensor(layers) - 1, persistent=False)
        self.features = features
        # The recurrent pooler applies its own dropout (nn.Dropout(0.1), as the CommonLit
        # write-ups do).
        recurrent = isinstance(pooler, RecurrentLayerPooling)
        self.dropout = nn.Identity() if recurrent else Dropout(dropout)
        stacked = words.output_size if words is not None else 0
        self.head = nn.Linear(pooler.output_size + stacked, num_outputs)
        self.loss = LOSSES[loss]
        self.backbone = backbone
        self.backbone_lr = backbone_lr
        self.layer_lr_decay = layer_lr_decay

    def parameter_groups(self, lr: float) -> list[dict[str, Any]]:
        """The head at ``lr``; a fine-tuned backbone at its own, usually much smaller, rate."""
        head = [p for name, p in self.named_parameters() if not name.startswith("backbone.")]
        groups: list[dict[str, Any]] = [{"params": head, "lr": lr}]
        if self.backbone is not None:
            groups += backbone_parameter_groups(
                self.backbone, self.backbone_lr, self.layer_lr_decay
            )
        return groups

    def outputs_from_layers(self, layers: Tensor, tokens: TokenBatch | None = None) -> Tensor:
        """layers ``(batch_size, num_layers, hidden)`` (all layers), and the texts' token
        features when the model stacks them -> ``(batch, num_outputs)``."""
        words = None
        if self.words is not None:
            if tokens is None:
                raise ValueError("this model stacks the texts' own features: give their tokens")
            words = self.words(tokens)
        return self.outputs_with(layers, words)

    def outputs_with(self, layers: Tensor, words: Tensor | None) -> Tensor:
        """layers ``(batch_size, num_layers, hidden)`` (all layers) and, when the model stacks
        the texts' own features, the word branch's vectors ``(batch_size, words.output_size)``
        -> ``(batch, num_outputs)``."""
        pooled = self.pooler(layers.index_select(1, self.layer_index))
        pooled = self.dropout(part_dropout(pooled, self.transformer_dropout, self.training))
        if words is not None:
            pooled = torch.cat([pooled, words], dim=-1)
        return self.head(pooled)

    def predict(self, batch: Batch) -> Tensor:
        """Logits or standardised values ``(batch_size, num_outputs)``."""
        if isinstance(batch, LayerBatch):
            return self.outputs_from_layers(batch.layers, batch.tokens)
        if self.backbone is None:
            raise ValueError("a frozen-backbone model takes per-layer vectors (a LayerBatch)")
        if isinstance(batch, BoundaryBatch):  # its top layers over the cached frozen bottom
            layers = boundary_layers(self.backbone, batch, self.features)
            return self.outputs_from_layers(layers, batch.tokens)
        if isinstance(batch, StackedSubwords):
            return self.outputs_from_layers(self.whole_pass(batch.subwords), batch.tokens)
        return self.outputs_from_layers(self.whole_pass(batch))

    def whole_pass(self, batch: SubwordBatch) -> Tensor:
        """Every layer's vector of each text ``(num_texts, layers, hidden)`` from the whole
        encoder: a top-K model's bottom in its frozen pass's precision, then its top."""
        assert self.backbone is not None, "a fine-tuned model"
        if self.split is not None:
            return self.split.layers(self.backbone, batch, self.features)
        return self.backbone.features(batch, self.features)

    def forward(self, batch: Batch) -> Tensor:
        """The training loss, averaged over texts."""
        if batch.targets is None:
            raise ValueError("the batch has no targets to compute a loss from")
        return self.loss(self.predict(batch), batch.targets)


def build_layer_pooling_model(
    config: LayerPoolingTextConfig,
    num_layers: int,
    hidden_size: int,
    num_outputs: int,
    backbone: TransformerBackbone | None = None,
    *,
    loss: str,
    vocabularies: TokenVocabularies | None = None,
    singletons: Tensor | None = None,
) -> LayerPoolingModel:
    """The head a config describes, over a backbone of ``num_layers`` x ``hidden_size``;
    ``vocabularies`` (and ``singletons``, see ``build_embedder``) when it stacks the texts' own
    features (``config.features``)."""
    options = config.layer_pooling
    layers = select_layers(num_layers, options.layers)
    pooler = build_layer_pooler(
        options.type,
        len(layers),
        hidden_size,
        lstm_hidden=options.lstm_hidden,
        summary=options.summary,
        dropout=options.dropout,
        start_layer=options.start_layer,
    )
    return LayerPoolingModel(
        pooler,
        layers,
        pooler_features(options.type, options.vectors),
        num_outputs,
        dropout=options.dropout,
        loss=loss,
        backbone=trained_backbone(backbone, config.backbone),
        backbone_lr=config.backbone.lr,
        layer_lr_decay=config.backbone.layer_lr_decay,
        words=build_word_branch(config, vocabularies, singletons),
        transformer_dropout=config.part_dropout.transformer,
        split=split_pass(config, num_layers),
    )


def split_pass(config: LayerPoolingTextConfig, num_layers: int) -> SplitPass | None:
    """A top-K model's pass at prediction where its frozen bottom runs in bfloat16 (None: the
    whole encoder as it trains, in float32)."""
    top, frozen = config.backbone.top_layers, FrozenPass.of(config.backbone)
    if top is None or top >= num_layers or frozen.precision == "32":
        return None
    return SplitPass(num_layers - top, frozen)


def build_word_branch(
    config: LayerPoolingTextConfig,
    vocabularies: TokenVocabularies | None,
    singletons: Tensor | None,
) -> WordBranch | None:
    """The recurrent reading of each text that ``config.features`` stacks, if any."""
    if config.features is None:
        return None
    if vocabularies is None:
        raise ValueError("a model that stacks token features needs their vocabularies")
    embedder = build_embedder(config.features, vocabularies, singletons)
    encoder = build_encoder(config.encoder, embedder.output_size)
    return WordBranch(
        embedder,
        encoder,
        build_text_pooling(config.pooling, encoder),
        config.encoder.outer_dropout,
        config.part_dropout.rates(),
    )
