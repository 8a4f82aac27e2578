"""A causal LSTM language model: embeddings -> unidirectional encoder -> logits over the vocab.

Each sequence is ``<s> w1 .. wn </s>``; the state after reading position t predicts token t+1.
The guard (:func:`bistack.causality.require_causal`) refuses a bidirectional encoder, whose
backward direction at t has already read token t+1, unless leakage is explicitly allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bistack.causality import require_causal
from bistack.data.batching import PAD_TAG
from bistack.dropout import Dropout
from bistack.encoders import SequenceEncoder
from bistack.language_models.config import LanguageModelConfig
from bistack.models.builders import build_encoder
from bistack.transfer import to_device


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class LMBatch:
    """words: ``(batch_size, seq_len)`` input ids (0 at padding); targets: the next token at
    each position, -100 at padding; mask: True at real positions."""

    words: Tensor
    targets: Tensor
    mask: Tensor

    def to(self, device: torch.device | str) -> LMBatch:
        return LMBatch(*(to_device(t, device) for t in (self.words, self.targets, self.mask)))


def collate_lm(sequences: list[list[int]]) -> LMBatch:
    """Pad id sequences ``<s> w1 .. wn </s>`` into inputs (all but the last id) and targets."""
    width = max(len(s) for s in sequences) - 1
    words = torch.zeros(len(sequences), width, dtype=torch.long)
    targets = torch.full((len(sequences), width), PAD_TAG, dtype=torch.long)
    for row, ids in enumerate(sequences):
        words[row, : len(ids) - 1] = torch.tensor(ids[:-1])
        targets[row, : len(ids) - 1] = torch.tensor(ids[1:])
    return LMBatch(words, targets, words > 0)


class LSTMLanguageModel(nn.Module):
    """Next-token prediction; causal unless built with ``allow_leakage``."""

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        encoder: SequenceEncoder,
        dropout: float,
        *,
        allow_leakage: bool = False,
    ) -> None:
        super().__init__()
        require_causal(encoder.bidirectional, "a language model", allow_leakage)
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.encoder = encoder
        self.dropout = Dropout(dropout)
        self.output = nn.Linear(encoder.output_size, vocab_size)

    def position_outputs(self, batch: LMBatch) -> Tensor:
        """Next-token logits ``(batch_size, seq_len, vocab_size)``."""
        embedded = self.dropout(self.embedding(batch.words))
        states = self.encoder(embedded, mask=batch.mask, validate=False).states
        return self.output(self.dropout(states))

    def forward(self, batch: LMBatch) -> Tensor:
        """Mean next-token cross-entropy over real positions (its exp is the perplexity)."""
        logits = self.position_outputs(batch)
        return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=PAD_TAG)

    def step(self, word: Tensor, state: object) -> tuple[Tensor, object]:
        """One token ``(batch_size,)`` -> next-token logits ``(batch_size, vocab)`` and state."""
        output, state = self.encoder.step(self.embedding(word), state)
        return self.output(output), state


def build_language_model(config: LanguageModelConfig, vocab_size: int) -> LSTMLanguageModel:
    encoder = build_encoder(config.encoder, config.features.word_dim)
    return LSTMLanguageModel(
        vocab_size,
        config.features.word_dim,
        encoder,
        config.encoder.outer_dropout,
        allow_leakage=config.allow_leakage,
    )
