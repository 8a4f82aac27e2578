"""Text classifier and regressor: token features -> recurrent encoder -> pooling -> linear head.

The classic BiLSTM-attention classifier (Zhou et al. 2016): embeddings, a BiLSTM, additive
attention, dropout, a linear layer on ``2 * hidden`` features; the pooling is chosen in the
config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from bistack.data.batching import TextBatch
from bistack.data.features import TokenVocabularies
from bistack.dropout import Dropout
from bistack.encoders import SequenceEncoder
from bistack.models.builders import build_embedder, build_encoder
from bistack.models.embeddings import TokenEmbedder
from bistack.pooling import AdditiveAttention, build_pooling
from bistack.text_models.config import PoolingConfig, TextModelConfig


@dataclass(frozen=True)
class TextOutput:
    """outputs: ``(batch, num_outputs)`` logits or standardised values; weights:
    ``(batch, seq_len)`` attention (exactly 0 at padding) or None for static pooling."""

    outputs: Tensor
    weights: Tensor | None


# What a text model is trained with, by the name its outputs object gives.
LOSSES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "cross_entropy": F.cross_entropy,
    "mse": F.mse_loss,
}


class SequenceClassifier(nn.Module):
    """One vector per text, pooled over the encoder states, then one linear layer.

    ``loss`` names what it is trained with (:data:`LOSSES`): ``cross_entropy`` makes the
    outputs class logits, ``mse`` standardised targets (the outputs object of its kind says
    which: ``bistack.text_models.outputs``).
    """

    def __init__(
        self,
        embedder: TokenEmbedder,
        encoder: SequenceEncoder,
        pooling: nn.Module,
        num_outputs: int,
        dropout: float,
        loss: str,
    ) -> None:
        super().__init__()
        self.embedder = embedder
        self.encoder = encoder
        self.pooling = pooling
        self.dropout = Dropout(dropout)
        self.head = nn.Linear(encoder.output_size, num_outputs)
        self.loss = LOSSES[loss]

    def predict(self, batch: TextBatch) -> TextOutput:
        tokens = self.dropout(self.embedder(batch))
        # The batch's lengths came from its collation (bistack.masking): not checked again.
        states = self.encoder(tokens, lengths=batch.lengths, validate=False).states
        pooled = self.pooling(states, batch.mask, validate=False)
        return TextOutput(self.head(self.dropout(pooled.vector)), pooled.weights)

    def forward(self, batch: TextBatch) -> Tensor:
        """The training loss, averaged over texts."""
        if batch.targets is None:
            raise ValueError("the batch has no targets to compute a loss from")
        return self.loss(self.predict(batch).outputs, batch.targets)


def build_classifier(
    config: TextModelConfig,
    vocabularies: TokenVocabularies,
    num_outputs: int,
    singletons: Tensor | None = None,
    *,
    loss: str,
) -> SequenceClassifier:
    """Build the classifier or regressor a config describes, trained with ``loss``
    (``singletons``: see ``build_embedder``)."""
    embedder = build_embedder(config.features, vocabularies, singletons)
    encoder = build_encoder(config.encoder, embedder.output_size)
    return SequenceClassifier(
        embedder,
        encoder,
        build_text_pooling(config.pooling, encoder),
        num_outputs,
        config.encoder.outer_dropout,
        loss=loss,
    )


def build_text_pooling(config: PoolingConfig, encoder: SequenceEncoder) -> nn.Module:
    """The pooling a ``pooling`` section names, over ``encoder``'s states."""
    if config.type == "additive":
        return AdditiveAttention(encoder.output_size, config.attention_size)
    return build_pooling(config.type, encoder.output_size, bidirectional=encoder.bidirectional)
