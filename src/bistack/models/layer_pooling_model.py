"""A classifier or regressor head that pools over a transformer's layers.

Per-layer vectors ``(batch_size, num_layers, hidden_size)`` (from the feature cache when the
backbone is frozen, or from the backbone itself when it is fine-tuned) -> the selected layers ->
a layer pooler -> dropout -> one linear layer (class logits, or standardised targets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bistack.config import LayerPoolingTextConfig
from bistack.dropout import Dropout
from bistack.layer_pooling import (
    RecurrentLayerPooling,
    build_layer_pooler,
    pooler_features,
    select_layers,
)
from bistack.models.backbone import SubwordBatch, TransformerBackbone


@dataclass(frozen=True)
class LayerBatch:
    """layers: ``(batch_size, num_layers, hidden_size)`` every layer's vector (1..N);
    targets: ``(batch_size,)`` class ids, ``(batch_size, num_targets)`` floats, or None."""

    layers: Tensor
    targets: Tensor | None = None

    def to(self, device: torch.device | str) -> LayerBatch:
        targets = None if self.targets is None else self.targets.to(device)
        return LayerBatch(self.layers.to(device), targets)


class LayerPoolingModel(nn.Module):
    """Layer pooler + linear head; with ``backbone`` set, the backbone is trained too."""

    def __init__(
        self,
        pooler: nn.Module,
        layers: list[int],
        features: Literal["cls", "mean"],
        num_outputs: int,
        *,
        dropout: float,
        regression: bool,
        backbone: TransformerBackbone | None = None,
        backbone_lr: float = 2e-5,
    ) -> None:
        super().__init__()
        self.pooler = pooler
        self.register_buffer("layer_index", torch.tensor(layers) - 1, persistent=False)
        self.features = features
        # The recurrent pooler applies its own dropout (nn.Dropout(0.1), as the CommonLit
        # write-ups do).
        recurrent = isinstance(pooler, RecurrentLayerPooling)
        self.dropout = nn.Identity() if recurrent else Dropout(dropout)
        self.head = nn.Linear(pooler.output_size, num_outputs)
        self.regression = regression
        self.backbone = backbone
        self.backbone_lr = backbone_lr

    def parameter_groups(self, lr: float) -> list[dict[str, Any]]:
        """The head at ``lr``; a fine-tuned backbone at its own, usually much smaller, rate."""
        head = [p for name, p in self.named_parameters() if not name.startswith("backbone.")]
        groups: list[dict[str, Any]] = [{"params": head, "lr": lr}]
        if self.backbone is not None:
            groups.append({"params": list(self.backbone.parameters()), "lr": self.backbone_lr})
        return groups

    def outputs_from_layers(self, layers: Tensor) -> Tensor:
        """layers ``(batch_size, num_layers, hidden)`` (all layers) -> ``(batch, num_outputs)``."""
        pooled = self.pooler(layers.index_select(1, self.layer_index))
        return self.head(self.dropout(pooled))

    def predict(self, batch: LayerBatch | SubwordBatch) -> Tensor:
        """Logits or standardised values ``(batch_size, num_outputs)``."""
        if isinstance(batch, LayerBatch):
            return self.outputs_from_layers(batch.layers)
        if self.backbone is None:
            raise ValueError("a frozen-backbone model takes per-layer vectors (a LayerBatch)")
        return self.outputs_from_layers(self.backbone(batch).of(self.features))

    def forward(self, batch: LayerBatch | SubwordBatch) -> Tensor:
        """The training loss, averaged over texts."""
        if batch.targets is None:
            raise ValueError("the batch has no targets to compute a loss from")
        outputs = self.predict(batch)
        if self.regression:
            return F.mse_loss(outputs, batch.targets)
        return F.cross_entropy(outputs, batch.targets)


def build_layer_pooling_model(
    config: LayerPoolingTextConfig,
    num_layers: int,
    hidden_size: int,
    num_outputs: int,
    backbone: TransformerBackbone | None = None,
    *,
    regression: bool,
) -> LayerPoolingModel:
    """The head a config describes, over a backbone of ``num_layers`` x ``hidden_size``."""
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
        regression=regression,
        backbone=backbone if config.backbone.finetune else None,
        backbone_lr=config.backbone.lr,
    )
