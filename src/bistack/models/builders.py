"""Builders shared by every model: token features and the recurrent encoder from a config."""

from __future__ import annotations

from torch import nn

from bistack.config import EncoderConfig, FeaturesConfig
from bistack.data.features import TokenVocabularies
from bistack.encoders import RecurrentEncoder
from bistack.models.embeddings import CharCNNEncoder, CharLSTMEncoder, TokenEmbedder


def build_embedder(features: FeaturesConfig, vocabularies: TokenVocabularies) -> TokenEmbedder:
    """Word ⊕ casing ⊕ character features, as the config's ``features`` section says."""
    char_encoder: CharLSTMEncoder | CharCNNEncoder | None = None
    num_chars = len(vocabularies.chars)
    if features.char_encoder == "lstm":
        char_encoder = CharLSTMEncoder(num_chars, features.char_dim, features.char_hidden)
    elif features.char_encoder == "cnn":
        char_encoder = CharCNNEncoder(num_chars, features.char_dim, features.char_hidden)
    return TokenEmbedder(
        nn.Embedding(len(vocabularies.words), features.word_dim, padding_idx=0),
        char_encoder,
        features.casing_dim,
        unk_replace=features.unk_replace,
    )


def build_encoder(config: EncoderConfig, input_size: int) -> RecurrentEncoder:
    return RecurrentEncoder(
        input_size,
        config.hidden_size,
        cell=config.cell,
        bidirectional=config.bidirectional,
        num_layers=config.num_layers,
        dropout=config.dropout,
        residual=config.residual,
    )
