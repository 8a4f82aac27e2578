"""What a tagger's network says of one sentence, as plain data (no torch): the outlets that run
a network elsewhere (an ONNX runtime, a server) build the same records from it."""

from __future__ import annotations

from dataclasses import dataclass, field

Span = tuple[int, int, str]  # (start, end, type), end exclusive


@dataclass(frozen=True)
class Analysis:
    """One sentence's predicted tags (ids, in the head's scheme), each token's probability of
    its predicted tag, each predicted entity's probability, and, when asked for, the best
    whole-sentence analyses with their probabilities (the first is ``path``)."""

    path: list[int]
    token_confidence: list[float]
    entities: dict[Span, float]
    alternatives: list[tuple[list[int], float]] = field(default_factory=list)
