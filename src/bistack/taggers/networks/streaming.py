"""A tagger that emits each tag as its token arrives: ``bistack predict MODEL --stream``.

Only a unidirectional recurrent tagger can do this (a bidirectional one needs the tokens still
to come). The recurrent state is carried from token to token; a softmax head tags each token
at once, a CRF head with the fixed lag of the model's ``head.stream_lag`` (0: greedy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import torch
from torch import Tensor

from bistack.causality import require_causal
from bistack.data.batching import collate_tagging, collate_tokens
from bistack.encoders import EncoderState
from bistack.fixed_lag import FixedLagDecoder, decode_with_lag
from bistack.schemes import convert_tags
from bistack.taggers.networks.network import SequenceTagger


class Streamable(Protocol):
    """What streaming reads of a tagger (``bistack.taggers.models.tagger.Tagger`` has it): its
    network, vocabularies, labels, the scheme its tags are written in, and its config (for
    ``head.stream_lag``)."""

    model: SequenceTagger
    vocabularies: Any
    output_scheme: str
    config: Any

    @property
    def labels(self) -> list[str]: ...


class StreamingTagger:
    """Feed tokens with :meth:`push`; end a sentence with :meth:`flush`."""

    def __init__(self, tagger: Streamable, lag: int | None = None) -> None:
        require_causal(tagger.model.encoder.bidirectional, "a streaming tagger")
        self.tagger = tagger
        self.model: SequenceTagger = tagger.model.eval()
        self.lag = tagger.config.head.stream_lag if lag is None else lag
        self.crf = self.model.head.crf
        self.reset()

    def reset(self) -> None:
        """Start a new sentence."""
        self.state: EncoderState = None
        self.decoder = FixedLagDecoder(self.crf, self.lag) if self.crf is not None else None
        self.tokens: list[str] = []
        self.tags: list[int] = []

    @torch.inference_mode()
    def emission(self, token: str) -> Tensor:
        """Tag scores ``(num_tags,)`` for the next token, advancing the recurrent state."""
        batch = collate_tokens([[token]], self.tagger.vocabularies)
        vector = self.model.embedder(batch)[:, 0]  # (1, features)
        state, self.state = self.model.encoder.step(vector, self.state)
        return self.model.head.project(state)[0]

    def push(self, token: str) -> list[tuple[str, str]]:
        """Add one token; return the (token, tag) pairs whose tags are now final."""
        self.tokens.append(token)
        scores = self.emission(token)
        if self.decoder is None:
            return self._emit([int(scores.argmax())])
        return self._emit(self.decoder.push(scores))

    def flush(self) -> list[tuple[str, str]]:
        """End the sentence: return the tags still waiting, and start a new sentence."""
        waiting = self._emit(self.decoder.flush()) if self.decoder is not None else []
        self.reset()
        return waiting

    def _emit(self, tag_ids: list[int]) -> list[tuple[str, str]]:
        start = len(self.tags)
        self.tags.extend(tag_ids)
        labels = self.tagger.labels
        # Converting a prefix is stable: each converted tag depends on itself and its predecessor.
        converted = convert_tags([labels[t] for t in self.tags], self.tagger.output_scheme)
        return list(zip(self.tokens[start : len(self.tags)], converted[start:], strict=True))

    @torch.inference_mode()
    def tag_batch(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """What the stream emits, computed in one batched, packed pass over whole sentences."""
        vocabularies = self.tagger.vocabularies
        batch = collate_tagging([vocabularies.encode(list(s)) for s in sentences], vocabularies)
        emissions = self.model.head.project(self.model.states(batch))
        if self.crf is None:
            paths = [
                row[: len(s)]
                for row, s in zip(emissions.argmax(-1).tolist(), sentences, strict=True)
            ]
        else:
            paths = decode_with_lag(self.crf, emissions, batch.mask, self.lag)
        labels = self.tagger.labels
        return [convert_tags([labels[t] for t in p], self.tagger.output_scheme) for p in paths]


def stream_lines(
    streamer: StreamingTagger, lines: Iterable[str], write: Callable[[str], None]
) -> None:
    """Tag whitespace-separated tokens from ``lines`` as they arrive (a blank line ends a
    sentence), writing ``token<TAB>tag`` lines as tags become final, and an empty line after
    each sentence (``predict --stream``)."""

    def written(pairs: list[tuple[str, str]]) -> None:
        for token, tag in pairs:
            write(f"{token}\t{tag}")

    for line in lines:
        if not line.strip():
            written(streamer.flush())
            write("")
            continue
        for token in line.split():
            written(streamer.push(token))
    written(streamer.flush())
