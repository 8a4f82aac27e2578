"""A tagger's log-potentials over a shared tag set, so that taggers blend as one CRF.

A linear-chain CRF scores a path by its emissions plus its transition, start and end scores;
a weighted sum of several CRFs' scores (each over the same tags) scores every path by the
weighted sum of theirs, so it is itself a CRF, and Viterbi decodes it exactly. At weight 1 on
one model it is that model: its path, its confidences. A softmax head is a CRF whose
transitions are all 0 over the log-probabilities of its tags (Viterbi then takes each token's
best tag, as the head does). A tag a model does not know is IMPOSSIBLE for it: the sum forbids
it wherever that model has weight, as a forbidden move of its scheme.

``oof_potentials.safetensors`` holds a tagger CV's out-of-fold potentials: ``emissions``
``(tokens, tags)`` (every sentence's tokens end to end, in the file's order, as the fold model
that held it out gives them), ``offsets`` ``(sentences + 1,)``, each sentence's ``fold``, and
each fold's ``transitions`` ``(folds, tags, tags)`` [from, to], ``start`` and ``end``
``(folds, tags)``, with the tags, their scheme and the file's scheme as metadata.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bistack.errors import ConfigError
from bistack.files.modeldir import atomic_write
from bistack.kernels.crf_compiled import IMPOSSIBLE
from bistack.taggers.emissions.confidence import CRFScores
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.ensembles.records import OutOfFoldPotentials

if TYPE_CHECKING:
    from bistack.taggers.emissions.calibration import DevEmissions
    from bistack.taggers.ensembles.records import TaggerFold
    from bistack.taggers.models.tagging import Tagging

POTENTIALS_FILE = "oof_potentials.safetensors"


def aligned_emissions(decoder: TagDecoder, emissions: np.ndarray, labels: list[str]) -> np.ndarray:
    """``emissions`` ``(..., decoder's tags)`` as log-potentials over ``labels`` ``(...,
    len(labels))``: a CRF's as they are, a softmax head's as log-probabilities; a tag the
    decoder does not know IMPOSSIBLE."""
    scores = emissions if decoder.crf is not None else _log_softmax(emissions)
    aligned = np.full((*emissions.shape[:-1], len(labels)), IMPOSSIBLE, dtype=np.float32)
    aligned[..., _columns(decoder, labels)] = scores
    return aligned


def aligned_crf(decoder: TagDecoder, labels: list[str]) -> CRFScores:
    """The decoder's transition, start and end scores over ``labels`` (a softmax head's: 0);
    moves to or from a tag it does not know IMPOSSIBLE."""
    size = len(labels)
    columns = _columns(decoder, labels)
    known = np.zeros(size, dtype=bool)
    known[columns] = True
    transitions = np.zeros((size, size), dtype=np.float32)
    start, end = np.zeros(size, dtype=np.float32), np.zeros(size, dtype=np.float32)
    if decoder.crf is not None:
        transitions[np.ix_(columns, columns)] = decoder.crf.transitions
        start[columns], end[columns] = decoder.crf.start, decoder.crf.end
    transitions[~known, :] = IMPOSSIBLE
    transitions[:, ~known] = IMPOSSIBLE
    start[~known], end[~known] = IMPOSSIBLE, IMPOSSIBLE
    return CRFScores(transitions, start, end)


def weighted_crf(parts: Sequence[tuple[float, CRFScores]]) -> CRFScores:
    """The weighted sum of CRFs' scores over one tag set: a CRF again."""
    return CRFScores(
        *(
            np.sum([weight * getattr(crf, name) for weight, crf in parts], axis=0).astype(
                np.float32
            )
            for name in ("transitions", "start", "end")
        )
    )


def _columns(decoder: TagDecoder, labels: list[str]) -> list[int]:
    column = {tag: index for index, tag in enumerate(labels)}
    return [column[tag] for tag in decoder.labels]


def _log_softmax(scores: np.ndarray) -> np.ndarray:
    shifted = scores - scores.max(axis=-1, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))).astype(np.float32)


def out_of_fold_potentials(
    records: Sequence[TaggerFold],
    held_out: dict[str, tuple[Tagging, DevEmissions]],
    labels: list[str],
    rows: int,
) -> OutOfFoldPotentials:
    """Each of the ``rows`` sentences' log-potentials ``(tokens, tags)`` over ``labels``, in
    the file's order, as the fold model that held it out scores it (``held_out``: each fold's
    model and emissions of its held-out sentences, by name), with that fold's CRF: what its
    folds' tags were decoded from, so that a blend at weight 1 on this CV tags as they did."""
    found: dict[int, tuple[np.ndarray, int]] = {}
    crfs = []
    for fold, record in enumerate(records):
        model, emissions = held_out[record.name]
        crfs.append(aligned_crf(model.decoder, labels))
        for batch in emissions.batches:
            aligned = aligned_emissions(model.decoder, batch.emissions, labels)
            for position, (index, length) in enumerate(
                zip(batch.indices, batch.lengths, strict=True)
            ):
                found[record.held[index]] = (aligned[position, :length], fold)
    ordered = [found[row] for row in range(rows)]
    model = held_out[records[0].name][0]
    return OutOfFoldPotentials(
        [sentence for sentence, _ in ordered],
        [fold for _, fold in ordered],
        crfs,
        labels,
        model.decoder.scheme,
        model.output_scheme,
    )


def save_potentials(
    path: Path,
    emissions: Sequence[np.ndarray],
    folds: Sequence[int],
    crfs: Sequence[CRFScores],
    labels: Sequence[str],
    scheme: str,
    output_scheme: str,
) -> None:
    """Each sentence's potentials ``(tokens, tags)`` over ``labels`` (in the file's order),
    the fold that held it out (an index into ``crfs``), and each fold's CRF scores, written
    whole or not at all."""
    from safetensors.numpy import save_file

    lengths = [len(e) for e in emissions]
    tensors: dict[str, np.ndarray] = {
        "emissions": np.ascontiguousarray(np.concatenate(emissions), dtype=np.float32),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "fold": np.asarray(folds, dtype=np.int64),
        "transitions": np.stack([crf.transitions for crf in crfs]).astype(np.float32),
        "start": np.stack([crf.start for crf in crfs]).astype(np.float32),
        "end": np.stack([crf.end for crf in crfs]).astype(np.float32),
    }
    meta = {"labels": list(labels), "scheme": scheme, "output_scheme": output_scheme}
    metadata = {"tags": json.dumps(meta)}
    atomic_write(path, lambda temporary: save_file(tensors, temporary, metadata=metadata))


def read_potentials(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``oof_potentials.safetensors``'s arrays and what they are over; an error naming the
    file where it is missing or damaged."""
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        raise ConfigError(
            f"{path}: missing: a blend of taggers weighs the out-of-fold log-potentials a "
            "tagger CV keeps there (a CV of plain tags, which have no entities to score a "
            "blend by, keeps none; one of an earlier version neither: run the same bistack cv "
            "again with --overwrite)"
        )
    try:
        with safe_open(str(path), framework="numpy") as opened:
            arrays = {name: opened.get_tensor(name) for name in opened.keys()}  # noqa: SIM118
            meta = json.loads((opened.metadata() or {})["tags"])
        tags = len(meta["labels"])
        emissions, folds = arrays["emissions"], arrays["fold"]
        shapes = (
            emissions.ndim == 2
            and emissions.shape[1] == tags
            and arrays["transitions"].shape[1:] == (tags, tags)
            and arrays["start"].shape[1:] == (tags,) == arrays["end"].shape[1:]
            and len(folds) == len(arrays["offsets"]) - 1
            and bool(((folds >= 0) & (folds < len(arrays["transitions"]))).all())
        )
        finite = all(bool(np.isfinite(a).all()) for a in arrays.values())
        if not shapes or not finite:
            raise ValueError("arrays that are not potentials over its tags")
    except (SafetensorError, OSError, KeyError, ValueError) as error:
        raise ConfigError(
            f"{path}: not the out-of-fold potentials bistack cv wrote ({error}); was it edited? "
            "Run the same bistack cv again to write it anew"
        ) from None
    return arrays, meta
