"""The sequence tagger: token features -> recurrent encoder -> softmax or CRF head.

A BiLSTM tagger (Huang et al. 2015) with the pieces Lample et al. 2016 and Ma & Hovy 2016 add:
character-level word encodings, a casing feature, dropout, and a CRF constrained to the scheme.
"""

from __future__ import annotations

from torch import Tensor, nn

from bistack.data.batching import TaggingBatch, TokenBatch
from bistack.data.features import TokenVocabularies
from bistack.dropout import Dropout
from bistack.encoders import SequenceEncoder
from bistack.models.builders import build_embedder, build_encoder
from bistack.models.embeddings import TokenEmbedder
from bistack.taggers.config import TaggerConfig
from bistack.taggers.networks.heads import CRFHead, SoftmaxHead, build_tagging_head


class SequenceTagger(nn.Module):
    """Tags every token of a :class:`TaggingBatch`."""

    def __init__(
        self,
        embedder: TokenEmbedder,
        encoder: SequenceEncoder,
        head: SoftmaxHead | CRFHead,
        dropout: float,
    ) -> None:
        super().__init__()
        self.embedder = embedder
        self.encoder = encoder
        self.head = head
        self.dropout = Dropout(dropout)

    def states(self, batch: TokenBatch) -> Tensor:
        """Encoder states ``(batch, seq_len, encoder.output_size)``, dropped out in training."""
        tokens = self.dropout(self.embedder(batch))
        return self.dropout(self.encoder(tokens, lengths=batch.lengths, validate=False).states)

    def forward(self, batch: TaggingBatch) -> Tensor:
        """Training loss per real token; padding never counts.

        The loss is ``forward`` so that wrappers such as DDP see the training computation.
        """
        if batch.tags is None:
            raise ValueError("the batch has no tags to compute a loss from")
        return self.head.loss(self.states(batch), batch.tags, batch.mask)

    def emissions(self, batch: TokenBatch) -> Tensor:
        """Tag scores ``(batch, seq_len, num_tags)`` (what ``head.decoder()`` turns into tags,
        confidences and k-best analyses)."""
        return self.head.emissions(self.states(batch))


def build_tagger(
    config: TaggerConfig, vocabularies: TokenVocabularies, singletons: Tensor | None = None
) -> SequenceTagger:
    """Build the tagger a config describes, sized to its vocabularies (``singletons``: see
    ``build_embedder``)."""
    embedder = build_embedder(config.features, vocabularies, singletons)
    encoder = build_encoder(config.encoder, embedder.output_size)
    labels = vocabularies.tags.items
    head = build_tagging_head(config.head, encoder.output_size, labels, config.data.scheme)
    return SequenceTagger(embedder, encoder, head, config.encoder.outer_dropout)
