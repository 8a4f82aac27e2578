"""Tag schemes for entity spans: IOB1, BIO (IOB2) and BIOES. Pure Python, no torch.

- IOB1 (CoNLL-2003): ``I-X`` inside an entity; ``B-X`` only starts an entity that directly
  follows another ``X`` entity.
- BIO / IOB2: every entity starts with ``B-X``.
- BIOES: ``B-X I-X* E-X`` for multi-token entities, ``S-X`` for single tokens.

``allowed_transitions`` gives the CRF its constraints; ``spans_from_tags`` reads entities the way
CoNLL's ``conlleval`` (and seqeval's default mode) does, so scoring and conversion agree.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Scheme = Literal["IOB1", "BIO", "BIOES"]
# Not an entity scheme: each tag is a label of its own (a part of speech, say). Tags are read as
# written, every transition is allowed, no entity spans are read, and scores are per token.
PLAIN = "none"
# What a tagger's output_scheme may be: an entity scheme, or plain tags.
OUTPUT_SCHEMES: tuple[str, ...] = ("IOB1", "BIO", "BIOES", PLAIN)
_ALIASES: dict[str, Scheme] = {
    "IOB1": "IOB1",
    "BIO": "BIO",
    "IOB2": "BIO",
    "BIOES": "BIOES",
    "IOBES": "BIOES",
}
_PREFIXES = {"IOB1": "BI", "BIO": "BI", "BIOES": "BIES"}


def normalise_scheme(scheme: str) -> Scheme:
    """Return the canonical name (IOB2 -> BIO, IOBES -> BIOES) or raise ValueError."""
    try:
        return _ALIASES[scheme.upper()]
    except KeyError:
        raise ValueError(
            f"unknown tag scheme: {scheme!r} (expected one of 'IOB1', 'BIO', 'BIOES')"
        ) from None


@functools.lru_cache(maxsize=4096)  # a tag set is small; every token's tag is split
def split_tag(tag: str) -> tuple[str, str]:
    """Split ``'B-PER'`` into ``('B', 'PER')``; ``'O'`` gives ``('O', '')``."""
    if tag == "O":
        return "O", ""
    prefix, sep, entity_type = tag.partition("-")
    if not sep or prefix not in ("B", "I", "E", "S") or not entity_type:
        raise ValueError(f"invalid tag {tag!r}: expected 'O' or a prefix B-, I-, E-, S- and a type")
    return prefix, entity_type


@dataclass(frozen=True)
class AllowedTransitions:
    """Which moves a scheme allows, indexed by label position.

    ``transitions[i][j]``: label i may be followed by label j (``[from, to]``); ``start[j]``:
    a sequence may begin with j; ``end[i]``: a sequence may end with i.
    """

    transitions: list[list[bool]]
    start: list[bool]
    end: list[bool]


def allowed_transitions(scheme: str, labels: Sequence[str]) -> AllowedTransitions:
    """The transitions ``scheme`` allows between ``labels`` (e.g. ``['O', 'B-PER', 'I-PER']``)."""
    if scheme == PLAIN:
        every = [True] * len(labels)
        return AllowedTransitions([list(every) for _ in labels], every, every)
    canonical = normalise_scheme(scheme)
    parsed = [split_tag(label) for label in labels]
    for label, (prefix, _) in zip(labels, parsed, strict=True):
        if prefix != "O" and prefix not in _PREFIXES[canonical]:
            raise ValueError(f"label {label!r} has a prefix that scheme {canonical} does not use")
    return AllowedTransitions(
        transitions=[[_can_follow(canonical, a, b) for b in parsed] for a in parsed],
        start=[_can_start(canonical, tag) for tag in parsed],
        end=[_can_end(canonical, tag) for tag in parsed],
    )


def _can_start(scheme: Scheme, tag: tuple[str, str]) -> bool:
    prefix = tag[0]
    if scheme == "IOB1":
        return prefix in ("O", "I")
    if scheme == "BIO":
        return prefix in ("O", "B")
    return prefix in ("O", "B", "S")


def _can_end(scheme: Scheme, tag: tuple[str, str]) -> bool:
    return scheme != "BIOES" or tag[0] in ("O", "E", "S")


def _can_follow(scheme: Scheme, prev: tuple[str, str], tag: tuple[str, str]) -> bool:
    (prev_prefix, prev_type), (prefix, entity_type) = prev, tag
    same_type = prev_type == entity_type
    if scheme == "IOB1":
        # B-X only separates two adjacent X entities.
        return prefix != "B" or (prev_prefix in ("B", "I") and same_type)
    if scheme == "BIO":
        return prefix != "I" or (prev_prefix in ("B", "I") and same_type)
    inside = prev_prefix in ("B", "I")
    if inside:
        return prefix in ("I", "E") and same_type
    return prefix in ("O", "B", "S")


@dataclass(frozen=True, order=True)
class Span:
    """An entity: tokens ``start`` (inclusive) to ``end`` (exclusive) of type ``label``."""

    start: int
    end: int
    label: str


def spans_from_tags(tags: Sequence[str]) -> list[Span]:
    """Read entities from tags of any scheme with conlleval's chunk rules (seqeval default mode)."""
    spans: list[Span] = []
    start = -1
    prev_prefix, prev_type = "O", ""
    for position, tag in enumerate([*tags, "O"]):
        prefix, entity_type = split_tag(tag)
        if start >= 0 and chunk_ends(prev_prefix, prefix, prev_type, entity_type):
            spans.append(Span(start, position, prev_type))
            start = -1
        if chunk_starts(prev_prefix, prefix, prev_type, entity_type):
            start = position
        prev_prefix, prev_type = prefix, entity_type
    return spans


def chunk_ends(prev: str, tag: str, prev_type: str, entity_type: str) -> bool:
    """Whether an entity whose last token so far is tagged ``prev`` (a prefix, and its type)
    ends before a token tagged ``tag``."""
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev != "O" and prev_type != entity_type


def chunk_starts(prev: str, tag: str, prev_type: str, entity_type: str) -> bool:
    """Whether an entity starts at a token tagged ``tag`` after one tagged ``prev``."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E") and prev in ("E", "S", "O"):
        return True
    return tag != "O" and prev_type != entity_type


def tags_from_spans(spans: Sequence[Span], length: int, scheme: str) -> list[str]:
    """Write ``spans`` over ``length`` tokens as tags in ``scheme``."""
    canonical = normalise_scheme(scheme)
    tags = ["O"] * length
    previous_end, previous_label = -1, ""
    for span in sorted(spans):
        size = span.end - span.start
        if canonical == "IOB1":
            adjacent = span.start == previous_end and span.label == previous_label
            tags[span.start : span.end] = [f"I-{span.label}"] * size
            if adjacent:
                tags[span.start] = f"B-{span.label}"
        elif canonical == "BIO":
            tags[span.start : span.end] = [f"B-{span.label}"] + [f"I-{span.label}"] * (size - 1)
        elif size == 1:
            tags[span.start] = f"S-{span.label}"
        else:
            tags[span.start : span.end] = (
                [f"B-{span.label}"] + [f"I-{span.label}"] * (size - 2) + [f"E-{span.label}"]
            )
        previous_end, previous_label = span.end, span.label
    return tags


def convert_tags(tags: Sequence[str], target: str) -> list[str]:
    """Re-write one sentence's tags in the ``target`` scheme, keeping every entity (plain
    tags stay as they are)."""
    if target == PLAIN or all(tag == "O" for tag in tags):  # no entity: every scheme alike
        return list(tags)
    return tags_from_spans(spans_from_tags(tags), len(tags), target)


def detect_scheme(sentences: Sequence[Sequence[str]]) -> Scheme:
    """Guess the scheme of tagged sentences.

    E-/S- prefixes mean BIOES. An entity opened by ``I-`` (after ``O``, another type, or at the
    start) only happens in IOB1. Otherwise ``B-`` tags mean BIO; only ``I-``/``O`` means IOB1.
    """
    seen_b = False
    for tags in sentences:
        prev_prefix, prev_type = "O", ""
        for tag in tags:
            prefix, entity_type = split_tag(tag)
            if prefix in ("E", "S"):
                return "BIOES"
            if prefix == "I" and (prev_prefix == "O" or prev_type != entity_type):
                return "IOB1"
            seen_b = seen_b or prefix == "B"
            prev_prefix, prev_type = prefix, entity_type
    return "BIO" if seen_b else "IOB1"
