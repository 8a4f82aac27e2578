"""Token representations: word embedding ⊕ casing embedding ⊕ character-level word encoding."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from bistack.data.batching import TokenBatch
from bistack.data.features import CASINGS
from bistack.devices.ahead import beside_the_host
from bistack.encoders import RecurrentEncoder, reads_packed
from bistack.masking import lengths_to_mask
from bistack.models.spelling_cache import SpellingCache, spelling_cache_on
from bistack.transfer import to_device


class CharLSTMEncoder(nn.Module):
    """A word as the final states of a BiLSTM over its characters (Lample et al. 2016).

    Words are run in up to ``length_groups`` groups of similar length, each only as wide as its
    longest word: word lengths vary a lot (most are short, a few long), and the recurrent cost
    grows with the padded width. Three groups cut a CoNLL batch's char BiLSTM time by about a
    quarter (``benchmarks/results/speed.md``); a group has at least ``words_per_group`` words,
    so a single sentence's few words run in one call pair, not three (its latency is the
    calls'). On a GPU the encoder reads packed sequences, which carry no padding, so all words
    run in one call. The result is the same whatever the grouping.
    """

    length_groups = 3
    words_per_group = 64

    def __init__(self, num_chars: int, char_dim: int, hidden_size: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.encoder = RecurrentEncoder(char_dim, hidden_size, bidirectional=True)
        self.output_size = self.encoder.output_size

    def forward(self, chars: Tensor, lengths: Tensor) -> Tensor:
        """chars ``(words, max_chars)``, lengths ``(words,)`` (each >= 1: a batch's, from its
        collation, so not checked again) -> ``(words, 2 * hidden)``."""
        if reads_packed(chars):  # padding costs nothing there, calls do
            return self.encoder(self.embedding(chars), lengths=lengths, validate=False).summary
        order = torch.argsort(lengths)
        ranked = lengths[order].tolist()  # ascending, read on the host where they live
        parts, end = [], 0
        groups = min(self.length_groups, max(1, len(order) // self.words_per_group))
        for group in order.chunk(groups):
            end += len(group)
            embedded = self.embedding(chars[group, : ranked[end - 1]])
            parts.append(self.encoder(embedded, lengths=lengths[group], validate=False).summary)
        return torch.cat(parts)[torch.argsort(order)]


class CharCNNEncoder(nn.Module):
    """A word as the max over a convolution of its characters (Ma & Hovy 2016)."""

    def __init__(self, num_chars: int, char_dim: int, filters: int, kernel_size: int = 3) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, kernel_size, padding=kernel_size // 2)
        self.output_size = filters

    def forward(self, chars: Tensor, lengths: Tensor) -> Tensor:
        """chars ``(words, max_chars)``, lengths ``(words,)`` -> ``(words, filters)``."""
        on_chars = to_device(lengths, chars.device)  # a batch's are on the host
        mask = lengths_to_mask(on_chars, chars.size(1), validate=False).unsqueeze(1)  # (w, 1, c)
        # Zero the padding so windows at a word's edge see the same zeros as the conv padding.
        embedded = self.embedding(chars).transpose(1, 2) * mask  # (words, char_dim, chars)
        features = self.conv(embedded)  # (words, filters, chars)
        return features.masked_fill(~mask, float("-inf")).max(dim=2).values


class TokenEmbedder(nn.Module):
    """Per-token vectors ``(batch, seq_len, output_size)`` from a :class:`TokenBatch`: the word
    embedding ⊕ casing embedding ⊕ character encoding, each of which may be absent.

    ``unk_replace``: in training, a word seen once in the training data is replaced by
    ``<unk>`` with this probability, so the unknown embedding is learnt (Lample et al. 2016).
    In prediction (evaluation mode, no gradients) each spelling's character encoding is
    computed once and reused (:class:`SpellingCache`).
    """

    singletons: Tensor  # (vocabulary,) bool: words seen once in training

    def __init__(
        self,
        word_embedding: nn.Embedding | None,
        char_encoder: CharLSTMEncoder | CharCNNEncoder | None,
        casing_dim: int,
        unk_replace: float = 0.0,
        singletons: Tensor | None = None,
    ) -> None:
        super().__init__()
        self.word_embedding = word_embedding
        self.char_encoder = char_encoder
        self.casing_embedding = (
            nn.Embedding(len(CASINGS) + 1, casing_dim, padding_idx=0) if casing_dim else None
        )
        self.unk_replace = unk_replace
        if singletons is None:
            words = word_embedding.num_embeddings if word_embedding is not None else 0
            singletons = torch.zeros(words, dtype=torch.bool)
        # Only needed while training, so not saved with the weights.
        self.register_buffer("singletons", singletons, persistent=False)
        self.spelling_cache = SpellingCache()
        self.output_size = (
            (word_embedding.embedding_dim if word_embedding is not None else 0)
            + casing_dim
            + (char_encoder.output_size if char_encoder is not None else 0)
        )

    def parts(self, batch: TokenBatch) -> list[tuple[str, Tensor]]:
        """Each feature's vectors ``(batch, seq_len, size)``, named ``words``, ``casing`` and
        ``chars``, in the order ``forward`` concatenates them."""
        parts = []
        if self.word_embedding is not None:
            words = batch.words
            if self.training and self.unk_replace > 0:
                drop = self.singletons[words] & (
                    torch.rand(words.shape, device=words.device) < self.unk_replace
                )
                words = words.masked_fill(drop, 1)  # 1 is <unk>
            parts.append(("words", self.word_embedding(words)))
        if self.casing_embedding is not None:
            parts.append(("casing", self.casing_embedding(batch.casing)))
        if self.char_encoder is not None:
            parts.append(("chars", self.spelled(batch)[batch.char_index]))
        return parts

    def spelled(self, batch: TokenBatch) -> Tensor:
        """The character encoding of each distinct token ``(unique_words, char_out)``: from
        the cache in prediction on the CPU, computed while training (or wherever gradients
        flow), and on a GPU, where checking the cache's weights would make the host wait for
        the device every batch, longer than the packed encoder takes."""
        assert self.char_encoder is not None
        if (
            self.training
            or torch.is_grad_enabled()
            or not batch.spellings
            or beside_the_host(batch.chars.device)
            or not spelling_cache_on()
        ):
            return self.char_encoder(batch.chars, batch.char_lengths)
        return self.spelling_cache.encode(
            self.char_encoder, batch.spellings, batch.chars, batch.char_lengths
        )

    def forward(self, batch: TokenBatch) -> Tensor:
        return torch.cat([vectors for _, vectors in self.parts(batch)], dim=-1)
