"""How sure a tagger is: per-token tag marginals, and the probability of each predicted entity,
over numpy arrays (no torch: an exported model's runtime computes them too).

For a CRF, a token's marginal ``P(y_t = tag | x)`` is the gradient of log Z with respect to
that emission (forward-backward; the compiled partition kernel returns it as its gradient). An
entity's confidence is the exact probability, under the CRF, that the span carries that type:
the probability of a run of tags (``B I* E`` or ``S`` in BIOES), which the same forward-backward
pass gives in O(span) (a CRF's posterior is a Markov chain). In BIO and IOB1, read as conlleval
reads them, the span opens with ``B-type`` or with an ``I-type`` whose token before is of
another type, and must not go on (``y_end != I-type``): inclusion-exclusion over runs one token
longer on either side.

A softmax tagger's tokens are independent: the same events, as products of its token
probabilities.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from bistack.kernels.crf_compiled import marginals_and_runs
from bistack.schemes import spans_from_tags

Span = tuple[int, int, str]  # (start, end, type), end exclusive
Run = tuple[int, int, tuple[int, ...]]  # (sign, first position, tags from it on)


class Alternative(NamedTuple):
    """One way of tagging a span: its ``tags`` from its start on, and the tags its neighbours
    must not take, or the entity would start earlier (``before``, just before its start) or run
    on (``after``, just past its end). Contiguous by construction, so that each term of its
    probability is a run of the CRF's chain; relative to its span, so that one serves every
    span of its type and width."""

    tags: tuple[int, ...]
    before: tuple[int, ...] = ()
    after: tuple[int, ...] = ()

    def terms(self, start: int, length: int) -> list[Run]:
        """Inclusion-exclusion over the neighbours, the span starting at ``start`` in a sentence
        of ``length``: ``P(this) = sum of sign * P(run)`` over the returned runs; a neighbour
        outside the sentence excludes nothing."""
        tags = self.tags
        if not (self.before or self.after):
            return [(1, start, tags)]
        before = self.before if start > 0 else ()
        after = self.after if start + len(tags) < length else ()
        earlier = start - 1
        return [
            (1, start, tags),
            *[(-1, earlier, (tag, *tags)) for tag in before],
            *[(-1, start, (*tags, tag)) for tag in after],
            *[(1, earlier, (first, *tags, last)) for first in before for last in after],
        ]


class SpanEvent(NamedTuple):
    """The event "a span is an entity of its type": the disjoint ``ways`` of tagging the span
    that starts at ``start``; its probability is their sum."""

    start: int
    ways: tuple[Alternative, ...]


def span_event(span: Span, path: Sequence[int], names: Sequence[str], scheme: str) -> SpanEvent:
    """The event "``span`` is an entity of its type", over tags named ``names``.

    BIOES (``B I* E`` or ``S``): one way. BIO and IOB1, read as conlleval reads them: the span
    opens with ``B-type``, or with ``I-type`` where the token before is not of that type; it
    continues with ``I-type`` and the next token is not ``I-type``. A CRF's constraints give the
    ways its scheme forbids probability 0, so the event is exact for every scheme. Where the
    scheme's tags for it were never seen in training, the path's own tags (a lower bound).
    """
    start, end, entity_type = span
    names = names if isinstance(names, tuple) else tuple(names)
    ways = scheme_ways(names, scheme, entity_type, end - start)
    return SpanEvent(start, ways or (Alternative(tuple(path[start:end])),))


@functools.lru_cache(maxsize=4096)
def scheme_ways(
    names: tuple[str, ...], scheme: str, entity_type: str, width: int
) -> tuple[Alternative, ...]:
    """The ways of :func:`span_event` for a span of ``width`` tokens, the same for every span of
    that type and width; empty where the scheme's tags for it are missing (the path's own tags
    stand in)."""
    tag = tag_ids(names, entity_type)
    inside, begin = tag["I"], tag["B"]
    if scheme == "BIOES":
        single, last = tag["S"], tag["E"]
        if width == 1:
            return (Alternative((single,)),) if single is not None else ()
        if begin is None or last is None or (width > 2 and inside is None):
            return ()
        middle = (inside,) * (width - 2) if inside is not None else ()
        return (Alternative((begin, *middle, last)),)
    if inside is None:  # a type without I-: only a lone B- token is of it for sure
        return (Alternative((begin,)),) if width == 1 and begin is not None else ()
    rest = (inside,) * (width - 1)
    of_type = (inside,) if begin is None else (inside, begin)
    ways = [Alternative((inside, *rest), of_type, (inside,))]
    if begin is not None:
        ways.append(Alternative((begin, *rest), (), (inside,)))
    return tuple(ways)


@functools.lru_cache(maxsize=256)
def tag_ids(names: tuple[str, ...], entity_type: str) -> dict[str, int | None]:
    """The ids of ``B-type``, ``I-type``, ``E-type`` and ``S-type`` among ``names`` (None where
    the tag set has none), by prefix."""
    index = {name: i for i, name in enumerate(names)}
    return {prefix: index.get(f"{prefix}-{entity_type}") for prefix in "BIES"}


@dataclass(frozen=True)
class CRFScores:
    """A CRF's transition ``(num_tags, num_tags)`` [from, to], start and end ``(num_tags,)``
    scores, forbidden moves set to IMPOSSIBLE (``CRF.constrained_scores``)."""

    transitions: np.ndarray
    start: np.ndarray
    end: np.ndarray


@dataclass(frozen=True)
class ClampedTerms:
    """Every run of tags a batch's events need, as columns. Term ``t`` belongs to sentence
    ``rows[t]`` and adds ``signs[t] * P(run)`` to that sentence's event ``events[t]``; its run
    holds tags ``tags[bounds[t]:bounds[t + 1]]`` from position ``firsts[t]`` on."""

    rows: np.ndarray
    events: np.ndarray
    signs: np.ndarray
    firsts: np.ndarray
    bounds: np.ndarray
    tags: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    def runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The runs, as :func:`~bistack.kernels.crf_compiled.marginals_and_runs` takes them."""
        return self.rows, self.firsts, self.bounds, self.tags


def clamped_terms(lengths: Sequence[int], events: Sequence[Sequence[SpanEvent]]) -> ClampedTerms:
    """Every run the events of a batch need: ``events[b]`` those of sentence b, whose first
    ``lengths[b]`` positions are real."""
    rows, numbers, runs = [], [], []
    for row, (length, sentence_events) in enumerate(zip(lengths, events, strict=True)):
        for number, (start, ways) in enumerate(sentence_events):
            for way in ways:
                for run in way.terms(start, length):
                    rows.append(row)
                    numbers.append(number)
                    runs.append(run)
    sizes = np.fromiter((len(tags) for _, _, tags in runs), np.int64, len(runs))
    bounds = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    return ClampedTerms(
        np.asarray(rows, dtype=np.int64),
        np.asarray(numbers, dtype=np.int64),
        np.fromiter((sign for sign, _, _ in runs), np.float64, len(runs)),
        np.fromiter((first for _, first, _ in runs), np.int64, len(runs)),
        bounds,
        np.fromiter(
            itertools.chain.from_iterable(tags for _, _, tags in runs), np.int64, int(bounds[-1])
        ),
    )


def span_probabilities(
    events: Sequence[Sequence[SpanEvent]], terms: ClampedTerms, term_probabilities: np.ndarray
) -> list[list[float]]:
    """Each event's probability, ``sum of sign * P(run)`` over its ``terms``, from each term's
    ``term_probabilities`` ``(terms,)``."""
    counts = np.fromiter(map(len, events), np.int64, len(events))
    first = np.cumsum(counts) - counts  # each sentence's first event, all laid end to end
    totals = np.zeros(int(counts.sum()))
    np.add.at(totals, first[terms.rows] + terms.events, terms.signs * term_probabilities)
    flat = iter(np.clip(totals, 0.0, 1.0).tolist())
    return [list(itertools.islice(flat, n)) for n in counts.tolist()]


def crf_confidences(
    scores: CRFScores,
    emissions: np.ndarray,
    lengths: Sequence[int] | np.ndarray,
    events: Sequence[Sequence[SpanEvent]],
) -> tuple[np.ndarray, list[list[float]]]:
    """Tag marginals ``(batch, seq_len, num_tags)`` (0 at padding) and the exact probability of
    each sentence's events, from one forward-backward pass over emissions
    ``(batch, seq_len, num_tags)``: the first ``lengths[b]`` positions of row b are real,
    ``events[b]`` its events. The runs' probabilities come from the pass's own scores, so no
    emission is clamped to -inf or IMPOSSIBLE on the way (a token whose every emission lies far
    below IMPOSSIBLE, as a sharp temperature or float16 training gives, changes nothing)."""
    terms = clamped_terms(list(lengths), events)
    marginals, term_probabilities = marginals_and_runs(
        emissions, np.asarray(lengths), scores.transitions, scores.start, scores.end, terms.runs()
    )
    return marginals, span_probabilities(events, terms, term_probabilities)


def independent_span_probabilities(
    probabilities: np.ndarray, length: int, events: Sequence[SpanEvent]
) -> list[float]:
    """The same events for independent tokens: ``probabilities`` ``(seq_len, num_tags)``."""
    results = []
    for start, ways in events:
        total = 0.0
        for way in ways:
            value = math.prod(float(probabilities[start + k, t]) for k, t in enumerate(way.tags))
            for position, tags in ((start - 1, way.before), (start + len(way.tags), way.after)):
                if 0 <= position < length and tags:
                    value *= 1.0 - sum(float(probabilities[position, t]) for t in tags)
            total += value
        results.append(min(1.0, max(0.0, total)))
    return results


def independent_best_paths(
    log_probabilities: np.ndarray, top_k: int
) -> list[tuple[list[int], float]]:
    """The ``top_k`` most probable tag sequences of independent tokens, ``log_probabilities``
    ``(seq_len, num_tags)``, with their probabilities. A beam of width ``top_k`` is exact here:
    every prefix of a k-best sequence is a k-best prefix, since the scores add up."""
    beam: list[tuple[float, list[int]]] = [(0.0, [])]
    k = min(top_k, log_probabilities.shape[1])
    for row in log_probabilities.tolist():
        best_tags = sorted(range(len(row)), key=row.__getitem__, reverse=True)[:k]
        extended = [(score + row[tag], [*path, tag]) for score, path in beam for tag in best_tags]
        beam = sorted(extended, key=lambda item: item[0], reverse=True)[:top_k]
    return [(path, math.exp(score)) for score, path in beam]


def spans_of(path: Sequence[int], names: Sequence[str]) -> list[Span]:
    return [(s.start, s.end, s.label) for s in spans_from_tags([names[t] for t in path])]
