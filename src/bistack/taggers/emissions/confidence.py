"""How sure a tagger is: per-token tag marginals, and the probability of each predicted entity,
over numpy arrays (no torch: an exported model's runtime computes them too).

For a CRF, a token's marginal ``P(y_t = tag | x)`` is the gradient of log Z with respect to
that emission (forward-backward; the compiled partition kernel returns it as its gradient). An
entity's confidence is the exact probability, under the CRF, that the span carries that type:
``Z(tags clamped to the entity) / Z``. In BIOES the clamped tags (``B I* E`` or ``S``) say
exactly that; in BIO the span must also not go on (``y_end != I-type``), one more partition.
In IOB1 the tags that open a span depend on the token before it, so the clamp is the predicted
path's own tags plus the same end condition: a lower bound of the span's probability.

A softmax tagger's tokens are independent: the same events, as products of its token
probabilities.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bistack.kernels.crf_compiled import log_partition
from bistack.schemes import spans_from_tags

Span = tuple[int, int, str]  # (start, end, type), end exclusive


@dataclass(frozen=True)
class Alternative:
    """One way of tagging a span: the tags at its positions (``clamp``: position -> tag id), and
    positions around it that must not take some tags (``exclude``), or the entity would start
    earlier or run on."""

    clamp: dict[int, int]
    exclude: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def terms(self, length: int) -> list[tuple[int, dict[int, int]]]:
        """Inclusion-exclusion: ``P(this) = sum of sign * P(clamp)`` over the returned terms."""
        exclusions = [(p, tags) for p, tags in self.exclude if 0 <= p < length and tags]
        if not exclusions:  # BIOES's one way, or a span at a sentence's edge
            return [(1, self.clamp)]
        terms = []
        for choice in itertools.product(*[[None, *tags] for _, tags in exclusions]):
            clamp = dict(self.clamp)
            chosen = [
                (p, tag) for (p, _), tag in zip(exclusions, choice, strict=True) if tag is not None
            ]
            clamp.update(chosen)
            terms.append(((-1) ** len(chosen), clamp))
        return terms


SpanEvent = tuple[Alternative, ...]  # disjoint ways of tagging the span; P is their sum


def span_event(span: Span, path: Sequence[int], names: Sequence[str], scheme: str) -> SpanEvent:
    """The event "``span`` is an entity of its type", over tags named ``names``.

    BIOES (``B I* E`` or ``S``): one way. BIO and IOB1, read as conlleval reads them: the span
    opens with ``B-type``, or with ``I-type`` where the token before is not of that type; it
    continues with ``I-type`` and the next token is not ``I-type``. A CRF's constraints give the
    ways its scheme forbids probability 0, so the event is exact for every scheme. Where the
    scheme's tags for it were never seen in training, the path's own tags (a lower bound).
    """
    start, end, entity_type = span
    tag = tag_ids(tuple(names), entity_type)
    inside, begin = tag["I"], tag["B"]
    if scheme == "BIOES":
        single, last = tag["S"], tag["E"]
        if end - start == 1 and single is not None:
            return (Alternative({start: single}),)
        if (
            end - start > 1
            and begin is not None
            and last is not None
            and (end - start == 2 or inside is not None)
        ):
            clamp = {p: inside for p in range(start + 1, end - 1) if inside is not None}
            return (Alternative(clamp | {start: begin, end - 1: last}),)
        return (Alternative({p: path[p] for p in range(start, end)}),)
    if end - start > 1 and inside is None:
        return (Alternative({p: path[p] for p in range(start, end)}),)
    rest = {p: inside for p in range(start + 1, end) if inside is not None}
    runs_on = ((end, (inside,)),) if inside is not None else ()
    of_type = tuple(t for t in (inside, begin) if t is not None)
    ways = []
    if inside is not None:
        ways.append(Alternative({start: inside} | rest, ((start - 1, of_type), *runs_on)))
    if begin is not None:
        ways.append(Alternative({start: begin} | rest, runs_on))
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


def crf_marginals(scores: CRFScores, emissions: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``(batch_size, seq_len, num_tags)`` tag marginals, 0 at padding; emissions
    ``(batch_size, seq_len, num_tags)``, ``lengths`` real positions per row."""
    return crf_log_z_and_marginals(scores, emissions, lengths)[1]


def crf_log_z_and_marginals(
    scores: CRFScores, emissions: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's log-partition ``(batch_size,)`` and its tag marginals (:func:`crf_marginals`),
    from one forward-backward pass."""
    log_z, marginals, _ = log_partition(
        emissions, lengths, scores.transitions, scores.start, scores.end, with_grad=True
    )
    return log_z, marginals


@dataclass(frozen=True)
class ClampedTerms:
    """Every clamped partition a batch's events need, as columns. Term ``t`` belongs to
    sentence ``rows[t]`` and adds ``signs[t] * Z(clamp) / Z`` to that sentence's event
    ``events[t]``; clamped position ``c`` (of term ``which[c]``) keeps only tag ``tags[c]`` at
    ``positions[c]``."""

    rows: np.ndarray
    events: np.ndarray
    signs: np.ndarray
    which: np.ndarray
    positions: np.ndarray
    tags: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    def allowed(self, width: int, num_tags: int) -> np.ndarray:
        """``(terms, width, num_tags)`` bool: the tags each term leaves at each position."""
        allowed = np.ones((len(self), width, num_tags), dtype=bool)
        allowed[self.which, self.positions] = False
        allowed[self.which, self.positions, self.tags] = True
        return allowed


def clamped_terms(lengths: Sequence[int], events: Sequence[Sequence[SpanEvent]]) -> ClampedTerms:
    """Every clamped partition the events of a batch need: ``events[b]`` those of sentence b,
    whose first ``lengths[b]`` positions are real."""
    rows, numbers, signs, clamps = [], [], [], []
    for row, (length, sentence_events) in enumerate(zip(lengths, events, strict=True)):
        for number, event in enumerate(sentence_events):
            for alternative in event:
                for sign, clamp in alternative.terms(length):
                    rows.append(row)
                    numbers.append(number)
                    signs.append(sign)
                    clamps.append(clamp)
    sizes = np.fromiter(map(len, clamps), np.int64, len(clamps))
    return ClampedTerms(
        np.asarray(rows, dtype=np.int64),
        np.asarray(numbers, dtype=np.int64),
        np.asarray(signs, dtype=np.float64),
        np.repeat(np.arange(len(clamps)), sizes),
        np.fromiter(itertools.chain.from_iterable(clamps), np.int64, int(sizes.sum())),
        np.fromiter(
            itertools.chain.from_iterable(c.values() for c in clamps), np.int64, int(sizes.sum())
        ),
    )


def span_probabilities(
    events: Sequence[Sequence[SpanEvent]],
    terms: ClampedTerms,
    log_z: np.ndarray,
    term_log_z: np.ndarray,
) -> list[list[float]]:
    """Each event's probability, ``sum of sign * Z(clamp) / Z`` over its ``terms``, from each
    sentence's ``log_z`` ``(batch,)`` and each term's ``term_log_z`` ``(terms,)``."""
    counts = np.fromiter(map(len, events), np.int64, len(events))
    first = np.cumsum(counts) - counts  # each sentence's first event, all laid end to end
    totals = np.zeros(int(counts.sum()))
    ratio = term_log_z.astype(np.float64) - log_z.astype(np.float64)[terms.rows]
    np.add.at(totals, first[terms.rows] + terms.events, terms.signs * np.exp(ratio))
    flat = iter(np.clip(totals, 0.0, 1.0).tolist())
    return [list(itertools.islice(flat, n)) for n in counts.tolist()]


def crf_span_probabilities(
    scores: CRFScores,
    emissions: np.ndarray,
    lengths: Sequence[int],
    events: Sequence[Sequence[SpanEvent]],
    log_z: np.ndarray | None = None,
) -> list[list[float]]:
    """Exact probability of each sentence's events: emissions ``(batch, seq_len, num_tags)``,
    the first ``lengths[b]`` positions of row b real, ``events[b]`` its events. Every clamped
    partition of the batch runs in one kernel call, beside each sentence's own unless its
    ``log_z`` ``(batch,)`` is given (the marginals' pass has it). A clamped
    position's other tags get -inf, not IMPOSSIBLE: a token whose every emission lies below
    IMPOSSIBLE (a sharp temperature, float16 training) would otherwise gain paths by the
    clamp, and the span's probability exceed 1 by hundreds of nats."""
    terms = clamped_terms(lengths, events)
    if not len(terms):
        return [[0.0] * len(sentence_events) for sentence_events in events]
    copies = emissions[terms.rows]  # (terms, seq_len, num_tags)
    kept = copies[terms.which, terms.positions, terms.tags]
    copies[terms.which, terms.positions] = -np.inf
    copies[terms.which, terms.positions, terms.tags] = kept
    moves = (scores.transitions, scores.start, scores.end)
    rows = np.asarray(lengths, dtype=np.int64)
    if log_z is None:
        copies, rows = np.concatenate([emissions, copies]), np.concatenate([rows, rows[terms.rows]])
        log_z, _, _ = log_partition(copies, rows, *moves)
        log_z, term_log_z = log_z[: len(lengths)], log_z[len(lengths) :]
    else:
        term_log_z, _, _ = log_partition(copies, rows[terms.rows], *moves)
    return span_probabilities(events, terms, log_z, term_log_z)


def independent_span_probabilities(
    probabilities: np.ndarray, length: int, events: Sequence[SpanEvent]
) -> list[float]:
    """The same events for independent tokens: ``probabilities`` ``(seq_len, num_tags)``."""
    results = []
    for event in events:
        total = 0.0
        for alternative in event:
            value = math.prod(float(probabilities[p, t]) for p, t in alternative.clamp.items())
            for position, tags in alternative.exclude:
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
