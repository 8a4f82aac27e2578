"""Token features every recipe prepares the same way: vocabularies, <unk> candidates, vectors."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from bistack.config import FeaturesConfig
from bistack.data.features import TokenVocabularies
from bistack.data.pretrained import load_vectors
from bistack.models.embeddings import TokenEmbedder

Pairs = Sequence[tuple[Sequence[str], Sequence[str]]]  # (tokens, tags); tags empty for texts


def build_vocabularies(features: FeaturesConfig, pairs: Pairs) -> TokenVocabularies:
    """Word, character and tag vocabularies of the training data, as ``features`` says."""
    return TokenVocabularies.build(
        pairs,
        min_freq=features.min_freq,
        lowercase=features.lowercase,
        normalise_digits=features.normalise_digits,
    )


def initialise_words(
    embedder: TokenEmbedder, features: FeaturesConfig, vocabularies: TokenVocabularies
) -> str:
    """Copy pretrained vectors into the word embedding; returns a coverage line to print."""
    path = features.pretrained
    if not path:
        return "word embeddings: trained from scratch"
    vectors, found = load_vectors(path, vocabularies.words, features.word_dim)
    with torch.no_grad():
        embedder.word_embedding.weight[found] = vectors[found]
    total = len(vocabularies.words) - 2
    coverage = float(found.sum()) / max(total, 1)
    return f"word embeddings: {int(found.sum())}/{total} words ({coverage:.1%}) from {path}"


def singleton_mask(vocabularies: TokenVocabularies, pairs: Pairs) -> torch.Tensor:
    """``(num_words,)`` bool: words seen exactly once in training (candidates for <unk>)."""
    counts = torch.zeros(len(vocabularies.words), dtype=torch.long)
    for tokens, _ in pairs:
        for token in tokens:
            counts[vocabularies.words.lookup(vocabularies.key(token))] += 1
    mask = counts == 1
    mask[:2] = False
    return mask
