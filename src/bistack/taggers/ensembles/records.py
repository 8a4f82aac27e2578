"""What a tagger's cross-validation keeps of its folds: each fold's tagging of its held-out
sentences (written to its ``fold.json``), what the folds share (a frozen backbone's word
states), and the pooled out-of-fold tags and token marginals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bistack.folds.contract import JSON, FoldResult

if TYPE_CHECKING:
    from bistack.models.backbone import TransformerBackbone
    from bistack.taggers.emissions.confidence import CRFScores
    from bistack.taggers.layer_recipe import WordStatesByLine

# A sentence as ``predict`` writes it: its tokens and entities with their confidences.
TaggedSentence = dict[str, Any]
# Each sentence's prediction (as ``predict`` writes it), tags and fold, by its row.
SentenceTagging = dict[int, tuple[TaggedSentence, list[str], int]]


@dataclass(frozen=True)
class TaggedHeldOut:
    """A fold model's tagging of its held-out sentences: each as ``predict`` writes it, its
    tags, the labels the model knows and the scheme it writes tags in."""

    predictions: list[TaggedSentence]
    tags: list[list[str]]
    labels: list[str]
    output_scheme: str

    def to_json(self) -> JSON:
        return {
            "predictions": self.predictions,
            "tags": self.tags,
            "labels": self.labels,
            "output_scheme": self.output_scheme,
        }


@dataclass(frozen=True)
class OutOfFoldPotentials:
    """Each sentence's out-of-fold log-potentials ``(tokens, tags)`` over ``labels`` (in
    ``scheme``; the file's tags are in ``output_scheme``) and the fold that held it out (an
    index into ``crfs``, each fold's CRF scores over ``labels``): see
    ``bistack.taggers.ensembles.potentials``."""

    sentences: list[np.ndarray]
    folds: list[int]
    crfs: list[CRFScores]
    labels: list[str]
    scheme: str
    output_scheme: str


@dataclass(frozen=True)
class OutOfFoldTagging:
    """A tagger CV's out-of-fold predictions, pooled: each sentence's ``tagging`` by its
    folds, the scheme those tags are in (``output_scheme``), and, once the ensemble's fit has
    added them, each sentence's ``potentials`` (what a blend weighs; none for plain tags)."""

    tagging: SentenceTagging
    output_scheme: str
    potentials: OutOfFoldPotentials | None = None


@dataclass(frozen=True)
class TaggerShared:
    """What every fold of a tagger over a frozen transformer shares: the backbone, and its
    word states of every sentence of the file (none for a recurrent tagger)."""

    backbone: TransformerBackbone | None = None
    word_states_of: WordStatesByLine | None = None


TaggerFold = FoldResult[TaggedHeldOut]


def tagging_of(record: TaggerFold) -> tuple[list[TaggedSentence], list[list[str]]]:
    """A fold's held-out sentences as ``predict`` writes them, and their tags."""
    tagging = record.held_out.predictions
    return tagging.predictions, tagging.tags
