"""Token features every recipe prepares the same way: vocabularies, <unk> candidates, vectors."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import torch

from bistack.config import FeaturesConfig
from bistack.data.features import TokenVocabularies
from bistack.data.pretrained import WordVectors, read_word_vectors
from bistack.data.vocab import Vocabulary
from bistack.models.embeddings import TokenEmbedder

Pairs = Sequence[tuple[Sequence[str], Sequence[str]]]  # (tokens, tags); tags empty for texts


def build_vocabularies(
    features: FeaturesConfig, pairs: Pairs
) -> tuple[TokenVocabularies, WordVectors | None]:
    """Word, character and tag vocabularies of the training data, as ``features`` says; with
    pretrained vectors, their words too (up to ``features.pretrained_max_words`` beyond the
    training data's, most frequent first), so a word seen only there is known at prediction
    time (Lample et al. 2016). Returns the vectors read, to initialise the embedding with."""
    vocabularies = TokenVocabularies.build(
        pairs,
        min_freq=features.min_freq,
        lowercase=features.lowercase,
        normalise_digits=features.normalise_digits,
    )
    if not features.pretrained:
        return vocabularies, None
    known = vocabularies.words.items[2:]
    vectors = read_word_vectors(
        features.pretrained,
        features.word_dim,
        vocabularies.key,
        set(known),
        features.pretrained_max_words,
        features.pretrained_format,
    )
    added = [k for k in vectors.keys if k not in vocabularies.words.index]
    words = Vocabulary([*known, *added])
    return replace(vocabularies, words=words), vectors


def initialise_words(
    embedder: TokenEmbedder,
    features: FeaturesConfig,
    vocabularies: TokenVocabularies,
    vectors: WordVectors | None,
    train_tokens: Iterable[str] = (),
    dev_tokens: Iterable[str] = (),
) -> str:
    """Copy pretrained vectors into the word embedding (frozen when the config says); returns
    a line on what they cover of train and dev, to print."""
    if vectors is None:
        return "word embeddings: trained from scratch"
    index = vectors.index()
    rows = [vocabularies.words.index[key] for key in vectors.keys]
    if embedder.word_embedding is None:
        raise ValueError("pretrained vectors need a word embedding (features.word_dim > 0)")
    weight = embedder.word_embedding.weight
    with torch.no_grad():
        weight[torch.tensor(rows, dtype=torch.long)] = vectors.vectors.to(weight.dtype)
    if features.freeze_pretrained:
        weight.requires_grad_(False)
    train_keys = [vocabularies.key(t) for t in train_tokens]
    dev_keys = [vocabularies.key(t) for t in dev_tokens]
    trained = set(train_keys)
    added = sum(key not in trained for key in vectors.keys)
    return (
        f"word embeddings: {len(vectors.keys):,} vectors from {features.pretrained} "
        f"({'frozen' if features.freeze_pretrained else 'fine-tuned'}); they cover "
        f"{_coverage(train_keys, index)} of train and {_coverage(dev_keys, index)} of dev; "
        f"{added:,} words known from the vectors alone"
    )


def _coverage(keys: Sequence[str], index: dict[str, int]) -> str:
    """The share of ``keys`` (and of their distinct values) that have a vector."""
    if not keys:
        return "none (no tokens)"
    covered = sum(k in index for k in keys)
    types = set(keys)
    return (
        f"{covered / len(keys):.1%} of tokens ({sum(k in index for k in types) / len(types):.1%}"
        " of word types)"
    )


def singleton_mask(vocabularies: TokenVocabularies, pairs: Pairs) -> torch.Tensor:
    """``(num_words,)`` bool: words seen exactly once in training (candidates for <unk>)."""
    counts = torch.zeros(len(vocabularies.words), dtype=torch.long)
    for tokens, _ in pairs:
        for token in tokens:
            counts[vocabularies.words.lookup(vocabularies.key(token))] += 1
    mask = counts == 1
    mask[:2] = False
    return mask
