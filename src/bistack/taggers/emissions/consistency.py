"""One type for the same words within a document: a second look over a tagger's entities.

A tagger reads a sentence alone, or with a window of its neighbours, so the same name can come
out an organisation in one sentence and a location in the next. On CoNLL-2003 dev the largest
class of errors the stacked tagger makes is the right span with the wrong type (154 of 360 for
one seed), often a name its other mentions in the document type right: a team named after its
city in a results table, say. The fix a reader makes, and the non-local consistency of Krishnan
& Manning (2006), as a rule over the tagger's own calibrated entity probabilities:

an entity the tagger is less than ``threshold`` sure of takes the type that entities of exactly
the same words carry elsewhere in its document, each at least ``threshold`` sure (their
probabilities summed per type).

Sure entities never change, no entity is added or removed, spans keep their boundaries, and
documents never mix. A retyped entity's probability is the tagger's probability of its new
type in its own sentence (``TagDecoder.analyse_paths``), so it reads low: the document, not the
sentence, chose it. Measured in ``benchmarks/results/document-consistency-conll03.md``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

from bistack.schemes import Span as SchemeSpan
from bistack.schemes import tags_from_spans
from bistack.taggers.emissions.confidence import Span, spans_of
from bistack.taggers.emissions.decoding import Analysis, TagDecoder

Words = tuple[str, ...]


def document_types(
    entities: Sequence[dict[Span, float]],
    sentences: Sequence[Sequence[str]],
    documents: Sequence[Hashable],
    threshold: float,
) -> dict[Hashable, dict[Words, dict[str, float]]]:
    """Per document, per entity string: each type's summed probability over the entities of
    that string at least ``threshold`` sure (``entities[i]``: sentence i's, span -> prob)."""
    types: dict[Hashable, dict[Words, dict[str, float]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(float))
    )
    for found, words, document in zip(entities, sentences, documents, strict=True):
        for (start, end, entity_type), probability in found.items():
            if probability >= threshold:
                types[document][tuple(words[start:end])][entity_type] += probability
    return types


def retyped_spans(
    entities: Sequence[dict[Span, float]],
    sentences: Sequence[Sequence[str]],
    documents: Sequence[Hashable],
    threshold: float,
) -> dict[int, list[Span]]:
    """The sentences (by index) where an entity changes type under the rule, with all their
    spans after it."""
    types = document_types(entities, sentences, documents, threshold)
    changed: dict[int, list[Span]] = {}
    for index, (found, words, document) in enumerate(
        zip(entities, sentences, documents, strict=True)
    ):
        spans = []
        for (start, end, entity_type), probability in found.items():
            votes = types[document].get(tuple(words[start:end]))
            if votes and probability < threshold:
                entity_type = max(votes, key=votes.__getitem__)
            spans.append((start, end, entity_type))
        if spans != list(found):
            changed[index] = spans
    return changed


def path_of(spans: Sequence[Span], length: int, decoder: TagDecoder) -> list[int] | None:
    """``spans`` as tag ids in the decoder's scheme; None where a tag they need was never
    learnt, or the tags would read back as other spans."""
    index = {label: number for number, label in enumerate(decoder.labels)}
    tags = tags_from_spans([SchemeSpan(*span) for span in spans], length, decoder.scheme)
    if any(tag not in index for tag in tags):
        return None
    path = [index[tag] for tag in tags]
    return path if spans_of(path, decoder.labels) == sorted(spans) else None


def consistent(
    decoder: TagDecoder,
    analyses: Sequence[Analysis],
    sentences: Sequence[Sequence[str]],
    documents: Sequence[Hashable],
    emissions: dict[int, np.ndarray],
) -> list[Analysis]:
    """``analyses`` (with confidences) after the rule at ``decoder.consistency``; a changed
    sentence is analysed again along its new path from ``emissions[i]`` ``(length, num_tags)``
    (kept for every sentence with an entity below the threshold). Its k best analyses stay the
    sentence's own."""
    found = [analysis.entities for analysis in analyses]
    result = list(analyses)
    for index, spans in retyped_spans(found, sentences, documents, decoder.consistency).items():
        length = len(sentences[index])
        path = path_of(spans, length, decoder)
        if path is None:
            continue
        (result[index],) = decoder.analyse_paths(
            emissions[index][None], [length], [path], [analyses[index].alternatives]
        )
    return result
