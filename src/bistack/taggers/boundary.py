"""A tagger's top K layers trained over its frozen bottom, the bottom's output cached once.

With ``backbone.finetune: K`` a tagger over a transformer's layers freezes the embeddings and the
layers below the boundary: what they give each sentence never changes, so it is computed once
and kept in the feature cache (keyed by the sentence and, reading document context, by its
document, as the frozen word states are): the subword rows of the sentence with their context,
as they enter the first trained layer, and its words' states in every frozen layer. A step runs
the K layers from those rows and forms each word's state in them as the whole pass forms it
(:func:`bistack.models.word_pieces.aligned_words`), above the frozen layers' (a
:class:`BottomWords` batch).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from bistack.data.conll import Sentence
from bistack.data.word_rows import WORD_SEPARATOR, sentence_contexts
from bistack.models.backbone import TransformerBackbone
from bistack.models.feature_cache import cached_rows, model_fingerprint
from bistack.models.frozen_pass import FrozenPass
from bistack.models.mode import evaluating
from bistack.models.top_layers import layer_call, top_states
from bistack.models.word_pieces import Alignment, aligned_words, tokenize_words
from bistack.system.heartbeat import Heartbeat
from bistack.taggers.config import LayerPoolingTaggerConfig
from bistack.transfer import to_device


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class BottomWords:
    """Sentences as a top-K step reads them. states ``(rows, seq, hidden)`` entering the first
    trained layer (0 past a row's end), attention_mask ``(rows, seq)``; subword_word
    ``(rows * seq,)`` each subword's word, numbered over the batch (-1: none);
    first_subword, last_subword ``(total_words,)``; lower ``(total_words, frozen layers,
    hidden)`` each word's states in the frozen layers."""

    states: Tensor
    attention_mask: Tensor
    subword_word: Tensor
    first_subword: Tensor
    last_subword: Tensor
    lower: Tensor

    def to(self, device: torch.device | str) -> BottomWords:
        return BottomWords(*(to_device(part, device) for part in self.parts()))

    def parts(self) -> tuple[Tensor, ...]:
        return (
            self.states,
            self.attention_mask,
            self.subword_word,
            self.first_subword,
            self.last_subword,
            self.lower,
        )

    def word_layers(self, backbone: TransformerBackbone, alignment: Alignment) -> Tensor:
        """Every word's state in every layer ``(total_words, layers, hidden)``: the frozen
        layers' from the cache, the trained ones' computed now from the boundary rows."""
        boundary = self.lower.shape[1]
        upper = top_states(backbone.model, boundary, self.states, self.attention_mask)
        words = aligned_words(
            upper, self.subword_word, self.first_subword, self.last_subword, alignment
        )
        return torch.cat([self.lower.to(words.dtype), words], dim=1)


class TaggerBottom:
    """The frozen bottom of ``backbone`` below layer ``boundary + 1`` for ``sentences``, read
    as the tagger of ``config`` reads them (its subword alignment, document context and
    window), computed once a sentence at the ``frozen`` pass's precision and kept in the
    feature cache (in float16, as the frozen word states are), held in memory for the run."""

    def __init__(
        self,
        backbone: TransformerBackbone,
        boundary: int,
        config: LayerPoolingTaggerConfig,
        sentences: Sequence[Sentence],
        frozen: FrozenPass,
        say: Callable[[str], None],
    ) -> None:
        layer_call(backbone.model)  # a family without a layer call refused before any pass
        self.backbone, self.boundary, self.config = backbone, boundary, config
        self.sentences, self.frozen, self.say = sentences, frozen, say
        options = config.backbone
        self.contexts = sentence_contexts(sentences, options.context)
        limit = backbone.limit(options.max_length)
        texts = [WORD_SEPARATOR.join(s.tokens) for s in sentences]
        settings: dict[str, object] = {"max_length": limit, "subwords": config.subwords}
        if self.contexts is not None:  # a sentence's states depend on its document's others
            texts = [
                f"{s.document}{WORD_SEPARATOR}{t}" for s, t in zip(sentences, texts, strict=True)
            ]
            settings["context"] = options.context
        key = frozen.cache_settings(settings) | {"kind": "tagger_boundary", "boundary": boundary}
        started = time.perf_counter()
        cached = cached_rows(
            options.cache_dir, model_fingerprint(backbone.folder), texts, key, self._bottom
        )
        say(
            f"the frozen bottom (layers 1-{boundary}) of {len(texts)} sentences {cached.said} "
            f"in {time.perf_counter() - started:.0f} s ({cached.path})"
        )
        self.states = cached.rows["states"]  # each sentence's rows' real subwords, end to end
        self.lengths = [lengths.tolist() for lengths in cached.rows["lengths"]]
        self.words = cached.rows["words"]  # each of those subwords' word in its sentence, or -1
        self.lower = cached.rows["lower"]  # each sentence's (words, boundary, hidden)

    @torch.no_grad()
    def _bottom(self, indices: list[int]) -> dict[str, list[Tensor]]:
        """The bottom's output for the sentences at ``indices``, a sentence's rows each."""
        backbone, options = self.backbone, self.config.backbone
        device = next(backbone.parameters()).device
        found: dict[str, list[Tensor]] = {"states": [], "lengths": [], "words": [], "lower": []}
        beat = Heartbeat("backbone", len(indices), "sentences", self.say)
        with evaluating(backbone):
            for start in range(0, len(indices), options.batch_size):
                chosen = indices[start : start + options.batch_size]
                beat.update(len(chosen))
                tokens = [self.sentences[i].tokens for i in chosen]
                around = None if self.contexts is None else [self.contexts[i] for i in chosen]
                pieces = tokenize_words(
                    backbone, tokens, options.max_length, around, options.context
                ).to(device)
                ids, mask = pieces.input_ids, pieces.attention_mask
                hidden = backbone.hidden_states(ids, mask, self.frozen)
                lower = aligned_words(
                    hidden[1 : self.boundary + 1],
                    pieces.subword_word,
                    pieces.first_subword,
                    pieces.last_subword,
                    self.config.subwords,
                )
                entering = hidden[self.boundary]
                self._keep(found, pieces.lengths, entering, mask, pieces.subword_word, lower)
        return found

    @staticmethod
    def _keep(
        found: dict[str, list[Tensor]],
        lengths: list[int],
        states: Tensor,
        mask: Tensor,
        subword_word: Tensor,
        lower: Tensor,
    ) -> None:
        """Each sentence's share of a batch's rows (a row is one sentence's: a long sentence
        is cut into rows between words), its words numbered from 0 within it."""
        starts = [0]
        for length in lengths:
            starts.append(starts[-1] + length)
        width = states.shape[1]
        owned: list[list[int]] = [[] for _ in lengths]
        words = subword_word.view(-1, width).cpu()
        for row in range(words.shape[0]):
            word = int(words[row].max())
            owned[bisect.bisect_right(starts, word) - 1].append(row)
        real = mask.sum(dim=1).cpu()
        # Kept in float16, as the frozen word states are: a base-size file's rows at float32
        # would take gigabytes.
        states, lower = states.half().cpu(), lower.half().cpu()
        for sentence, rows in enumerate(owned):
            ends = [int(real[row]) for row in rows]
            own = torch.cat([words[row, :end] for row, end in zip(rows, ends, strict=True)])
            kept = [states[row, :end] for row, end in zip(rows, ends, strict=True)]
            found["states"].append(torch.cat(kept))
            found["lengths"].append(torch.tensor(ends))
            found["words"].append(torch.where(own >= 0, own - starts[sentence], -1))
            found["lower"].append(lower[starts[sentence] : starts[sentence + 1]].clone())

    def word_states(self, alignment: Alignment) -> Tensor:
        """Every sentence's flat word states ``(total_words, layers, hidden)``, float16 on the
        host in the sentences' order (as the frozen word states are cached): the frozen layers'
        from the cache, the trained top layers run now from it (evaluation mode, no
        gradients), batches of similar length on the backbone's device. Dev is scored so at
        each validation, without the bottom's pass."""
        device = next(self.backbone.parameters()).device
        order = sorted(range(len(self.sentences)), key=lambda i: len(self.states[i]))
        size = self.config.backbone.batch_size
        found: list[Tensor] = [torch.empty(0)] * len(self.sentences)
        with evaluating(self.backbone), torch.no_grad():
            for start in range(0, len(order), size):
                chosen = order[start : start + size]
                words = self.batch(chosen).to(device).word_layers(self.backbone, alignment)
                counts = [len(self.sentences[i].tokens) for i in chosen]
                for index, own in zip(chosen, words.half().cpu().split(counts), strict=True):
                    found[index] = own
        return torch.cat(found)

    def batch(self, indices: Sequence[int]) -> BottomWords:
        """The sentences at ``indices`` as a step reads them, their rows padded to the longest
        and their words numbered over the batch in order."""
        parts, words, sizes = [], [], []
        offset = 0
        for index in indices:
            rows = self.lengths[index]
            own_rows = self.words[index].split(rows)
            for part, own in zip(self.states[index].split(rows), own_rows, strict=True):
                parts.append(part.float())
                words.append(torch.where(own >= 0, own + offset, -1))
                sizes.append(len(part))
            offset += len(self.sentences[index].tokens)
        width = max(sizes)
        states = parts[0].new_zeros((len(parts), width, parts[0].shape[-1]))
        mask = torch.zeros((len(parts), width), dtype=torch.long)
        subword_word = torch.full((len(parts), width), -1, dtype=torch.long)
        for row, (part, own, size) in enumerate(zip(parts, words, sizes, strict=True)):
            states[row, :size], mask[row, :size], subword_word[row, :size] = part, 1, own
        flat = subword_word.flatten()
        positions = torch.arange(len(flat))
        real = flat >= 0
        first = torch.full((offset,), len(flat), dtype=torch.long).scatter_reduce(
            0, flat[real], positions[real], "amin"
        )
        last = torch.full((offset,), -1, dtype=torch.long).scatter_reduce(
            0, flat[real], positions[real], "amax"
        )
        lower = torch.cat([self.lower[index] for index in indices]).float()
        return BottomWords(states, mask, flat, first, last, lower)
