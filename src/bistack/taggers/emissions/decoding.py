"""What a tagger's emissions mean, written once: tags (the CRF's constrained Viterbi path, or
each token's best tag), each token's probability of its tag, each entity's exact probability,
and the k best analyses. Over numpy arrays, so that the PyTorch taggers and an exported model's
runtime (no torch) turn emissions into the same analyses by the same code.

A :class:`TagDecoder` is what a tagging head knows besides its emissions: the labels, the
scheme its spans are read in, and, for a CRF, its constrained transition scores. It is written
into an exported directory as JSON and read back there.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bistack.kernels.crf_compiled import IMPOSSIBLE, log_partition, viterbi_best, viterbi_top_k
from bistack.metrics.text import checked_temperature
from bistack.schemes import PLAIN, allowed_transitions
from bistack.taggers.emissions.confidence import (
    CRFScores,
    Span,
    SpanEvent,
    crf_confidences,
    independent_best_paths,
    independent_span_probabilities,
    span_event,
)
from bistack.taggers.emissions.scheme_table import Paths, chunks_of


@dataclass(frozen=True)
class Analysis:
    """One sentence's predicted tags (ids, in the head's scheme), each token's probability of
    its predicted tag, each predicted entity's probability, and, when asked for, the best
    whole-sentence analyses with their probabilities (the first is ``path``)."""

    path: list[int]
    token_confidence: list[float]
    entities: dict[Span, float]
    alternatives: list[tuple[list[int], float]] = field(default_factory=list)


@dataclass(frozen=True)
class TagDecoder:
    """Turns emissions into analyses. labels: the tags, in the head's scheme (``scheme``;
    ``none`` for plain tags, which have no entities); crf: the CRF's scores, or None for a
    softmax head (tokens independent)."""

    labels: list[str]
    scheme: str
    crf: CRFScores | None = None
    # Confidences from scores divided by this (fitted on dev after training: see
    # bistack.taggers.emissions.calibration). Every path's score is divided alike, so the best path
    # and the
    # order of the k best do not change; only how sure the tagger says it is.
    temperature: float = 1.0
    # Document-level type consistency (bistack.taggers.emissions.consistency): an entity less sure
    # than
    # this takes the type its words carry, at least this sure, elsewhere in its document. 0: off.
    consistency: float = 0.0

    def analyse(
        self,
        emissions: np.ndarray,
        lengths: Sequence[int],
        confidence: bool = True,
        top_k: int = 1,
    ) -> list[Analysis]:
        """Per sentence of ``emissions`` ``(batch, seq_len, num_tags)`` (row b real for its first
        ``lengths[b]`` positions): the best tags; with ``confidence``, also the token and entity
        probabilities and, with ``top_k`` > 1, the ``top_k`` best analyses."""
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        real = np.asarray(lengths, dtype=np.int64)
        if self.temperature != 1.0:
            emissions = emissions / np.float32(self.temperature)
        if self.crf is None:
            return self._independent(emissions, real, confidence, top_k)
        return self._crf(self._tempered, emissions, real, confidence, top_k)

    def marginals(self, emissions: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
        """Each token's probability of each tag ``(batch, seq_len, num_tags)`` (0 at padding),
        the temperature applied: a CRF's marginals over every path, or a softmax head's."""
        if self.temperature != 1.0:
            emissions = emissions / np.float32(self.temperature)
        real = np.asarray(lengths, dtype=np.int64)
        if self.crf is None:
            probabilities = _softmax(emissions)
            probabilities[np.arange(emissions.shape[1])[None, :] >= real[:, None]] = 0.0
            return probabilities
        return crf_confidences(self._tempered, emissions, real, [[]] * len(real))[0]

    @classmethod
    def constrained(cls, labels: list[str], scheme: str) -> TagDecoder:
        """A decoder whose only transition scores are the scheme's constraints (0 where a move
        is allowed, forbidden elsewhere): over log-probabilities it finds the most probable
        path the scheme allows (an ensemble's averaged marginals)."""
        allowed = allowed_transitions(scheme, labels)

        def scores(moves: list[Any]) -> np.ndarray:
            return np.where(np.asarray(moves), 0.0, IMPOSSIBLE).astype(np.float32)

        crf = CRFScores(scores(allowed.transitions), scores(allowed.start), scores(allowed.end))
        return cls(labels, scheme, crf)

    def tempered_crf(self) -> CRFScores | None:
        """The CRF's scores as its confidences read them (the temperature applied); None for a
        softmax head."""
        return None if self.crf is None else self._tempered

    @functools.cached_property
    def _tempered(self) -> CRFScores:
        """The CRF's scores divided by the temperature, once a decoder; forbidden moves stay
        forbidden: below 1 they are multiplied by 1/T as the emissions are (IMPOSSIBLE is
        finite, and emissions sharpened past it would buy a forbidden move), above 1 they keep
        IMPOSSIBLE."""
        crf = self.crf
        assert crf is not None, "a softmax head has no CRF to temper"
        if self.temperature == 1.0:
            return crf
        divisor = np.float32(self.temperature)
        forbidden = np.float32(IMPOSSIBLE * max(1.0, 1.0 / self.temperature))
        return CRFScores(
            *(
                np.where(scores <= IMPOSSIBLE, forbidden, scores / divisor).astype(scores.dtype)
                for scores in (crf.transitions, crf.start, crf.end)
            )
        )

    def _crf(
        self,
        crf: CRFScores,
        emissions: np.ndarray,
        lengths: np.ndarray,
        confidence: bool,
        top_k: int,
    ) -> list[Analysis]:
        scores = (crf.transitions, crf.start, crf.end)
        if top_k == 1:
            best, _ = viterbi_best(emissions, lengths, *scores)
            ranked, path_scores = best[:, None], None
        else:
            ranked, path_scores = viterbi_top_k(emissions, lengths, *scores, top_k)
        paths = [ranked[row, 0, :length].tolist() for row, length in enumerate(lengths)]
        if not confidence:
            return [Analysis(path, [], {}) for path in paths]
        alternatives: list[list[tuple[list[int], float]]] = [[] for _ in paths]
        if path_scores is not None:
            log_z, _, _ = log_partition(emissions, lengths, *scores)
            chances = np.exp(path_scores - log_z[:, None]).tolist()  # (batch, top_k)
            for row, length in enumerate(lengths):
                for rank in range(top_k):
                    if chances[row][rank] > 0:  # a path that does not exist scores -inf
                        path = ranked[row, rank, :length].tolist()
                        alternatives[row].append((path, chances[row][rank]))
        return self._crf_confidences(crf, emissions, lengths, paths, alternatives)

    def _crf_confidences(
        self,
        crf: CRFScores,
        emissions: np.ndarray,
        lengths: np.ndarray,
        paths: list[list[int]],
        alternatives: list[list[tuple[list[int], float]]],
    ) -> list[Analysis]:
        """Analyses of ``paths``: each token's marginal of its tag, each entity's probability."""
        spans, events = self.span_events(paths)
        marginals, chances_of = crf_confidences(crf, emissions, lengths, events)
        tokens = Paths(paths).of_tags(marginals)
        return [
            Analysis(path, token, dict(zip(spans[row], chances_of[row], strict=True)), others)
            for row, (path, token, others) in enumerate(
                zip(paths, tokens, alternatives, strict=True)
            )
        ]

    def span_events(
        self, paths: Sequence[Sequence[int]]
    ) -> tuple[list[list[Span]], list[list[SpanEvent]]]:
        """Each path's entities, and for each the event "it is an entity of its type" whose
        probability is its confidence (:func:`~bistack.taggers.emissions.confidence.span_event`)."""
        spans, names = self._spans(paths), tuple(self.labels)  # (span_event's cache key)
        events = [
            [span_event(s, path, names, self.scheme) for s in row_spans]
            for path, row_spans in zip(paths, spans, strict=True)
        ]
        return spans, events

    def _independent(
        self, emissions: np.ndarray, lengths: np.ndarray, confidence: bool, top_k: int
    ) -> list[Analysis]:
        if not confidence:
            best = emissions.argmax(axis=-1)
            return [Analysis(best[row, :n].tolist(), [], {}) for row, n in enumerate(lengths)]
        probabilities = _softmax(emissions)  # (batch, seq_len, num_tags)
        best = probabilities.argmax(axis=-1)
        paths = [best[row, :length].tolist() for row, length in enumerate(lengths.tolist())]
        alternatives: list[list[tuple[list[int], float]]] = [[] for _ in paths]
        if top_k > 1:
            with np.errstate(divide="ignore"):  # a probability of 0 is a log of -inf
                log_probabilities = np.log(probabilities)
            alternatives = [
                independent_best_paths(log_probabilities[row, : len(path)], top_k)
                for row, path in enumerate(paths)
            ]
        return self._independent_confidences(probabilities, paths, alternatives)

    def _independent_confidences(
        self,
        probabilities: np.ndarray,
        paths: list[list[int]],
        alternatives: list[list[tuple[list[int], float]]],
    ) -> list[Analysis]:
        """Analyses of ``paths`` from token ``probabilities`` ``(batch, seq_len, num_tags)``."""
        results = []
        every_span, every_event = self.span_events(paths)
        for row, (path, spans, events) in enumerate(
            zip(paths, every_span, every_event, strict=True)
        ):
            chances = independent_span_probabilities(probabilities[row], len(path), events)
            entities = dict(zip(spans, chances, strict=True))
            token = probabilities[row, np.arange(len(path)), path].tolist()
            results.append(Analysis(path, token, entities, alternatives[row]))
        return results

    def analyse_paths(
        self,
        emissions: np.ndarray,
        lengths: Sequence[int],
        paths: Sequence[Sequence[int]],
        alternatives: Sequence[list[tuple[list[int], float]]] | None = None,
    ) -> list[Analysis]:
        """Analyses of given ``paths`` (tag ids, one per real position), not of the best ones:
        each token's probability of its tag in the path and each of the path's entities'
        probability, as ``analyse`` gives for the best path. ``alternatives``: each sentence's k
        best analyses, kept as they are."""
        real = np.asarray(lengths, dtype=np.int64)
        if self.temperature != 1.0:
            emissions = emissions / np.float32(self.temperature)
        chosen = [list(path) for path in paths]
        kept = [list(a) for a in alternatives] if alternatives is not None else [[] for _ in chosen]
        if self.crf is None:
            return self._independent_confidences(_softmax(emissions), chosen, kept)
        return self._crf_confidences(self._tempered, emissions, real, chosen, kept)

    def _spans(self, paths: Sequence[Sequence[int]]) -> list[list[Span]]:
        """Each path's entities (none in plain tags), every path at once."""
        if self.scheme == PLAIN:
            return [[] for _ in paths]
        return chunks_of(tuple(self.labels)).spans(paths)

    def to_json(self) -> dict[str, Any]:
        """Plain data (an exported directory keeps it in export.json)."""
        crf = None
        if self.crf is not None:
            crf = {
                "transitions": self.crf.transitions.tolist(),
                "start": self.crf.start.tolist(),
                "end": self.crf.end.tolist(),
            }
        written: dict[str, Any] = {"labels": list(self.labels), "scheme": self.scheme, "crf": crf}
        if self.temperature != 1.0:
            written["temperature"] = self.temperature
        if self.consistency:
            written["consistency"] = self.consistency
        return written

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TagDecoder:
        """The decoder ``to_json`` wrote; scores as float32, the emissions' dtype."""
        crf = data.get("crf")
        scores = None
        if crf is not None:
            scores = CRFScores(
                *(np.asarray(crf[key], dtype=np.float32) for key in ("transitions", "start", "end"))
            )
        temperature = checked_temperature(data.get("temperature", 1.0))  # absent: uncalibrated
        consistency = float(data.get("consistency", 0.0))  # absent: each sentence alone
        return cls(list(data["labels"]), str(data["scheme"]), scores, temperature, consistency)


def _softmax(emissions: np.ndarray) -> np.ndarray:
    """Per-token tag probabilities of ``emissions`` ``(batch, seq_len, num_tags)``."""
    shifted = np.exp(emissions - emissions.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)
