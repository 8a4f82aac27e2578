"""Builders shared by every model: token features and the recurrent encoder from a config."""

from __future__ import annotations

from torch import Tensor, nn

from bistack.config import EncoderConfig, FeaturesConfig
from bistack.data.features import TokenVocabularies
from bistack.encoders import RecurrentEncoder, SequenceEncoder
from bistack.models.embeddings import CharCNNEncoder, CharLSTMEncoder, TokenEmbedder


def build_embedder(
    features: FeaturesConfig, vocabularies: TokenVocabularies, singletons: Tensor | None = None
) -> TokenEmbedder:
    """Word ⊕ casing ⊕ character features, as the config's ``features`` section says.

    ``singletons``: ``(num_words,)`` bool, the training words seen once, which training replaces
    by <unk> with probability ``features.unk_replace`` (None when only predicting)."""
    char_encoder: CharLSTMEncoder | CharCNNEncoder | None = None
    num_chars = len(vocabularies.chars)
    if features.char_encoder == "lstm":
        char_encoder = CharLSTMEncoder(num_chars, features.char_dim, features.char_hidden)
    elif features.char_encoder == "cnn":
        char_encoder = CharCNNEncoder(num_chars, features.char_dim, features.char_hidden)
    words = vocabularies.words
    return TokenEmbedder(
        nn.Embedding(len(words), features.word_dim, padding_idx=0) if features.word_dim else None,
        char_encoder,
        features.casing_dim,
        unk_replace=features.unk_replace,
        singletons=singletons,
    )


def build_encoder(config: EncoderConfig, input_size: int) -> SequenceEncoder:
    """The encoder an ``encoder`` section describes; a new cell is added here and in
    ``EncoderConfig.cell``, and every model gets it."""
    return RecurrentEncoder(
        input_size,
        config.hidden_size,
        cell=config.cell,
        bidirectional=config.bidirectional,
        num_layers=config.num_layers,
        dropout=config.dropout,
        residual=config.residual,
    )
