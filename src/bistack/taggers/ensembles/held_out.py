"""What a tagger's fold keeps of its held-out pass (``held_out.safetensors``, beside its run):
its network's emissions of its held-out sentences, and its decoder (the CRF's scores, labels,
scheme) with its calibration and output scheme. The process that finishes a cross-validation,
after workers, Ray tasks or other machines trained the folds, fits the cross-fitted and the
ensemble's temperatures from these alone (:class:`ReplayedFold`): no fold's model is opened
and no network runs again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bistack.data.conll import Sentence
from bistack.files.modeldir import atomic_write
from bistack.taggers.emissions.calibration import DevEmissions
from bistack.taggers.emissions.confidence import CRFScores
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.models.tagging import Tagging

HELD_OUT_FILE = "held_out.safetensors"
CRF_ARRAYS = ("crf.transitions", "crf.start", "crf.end")


class ReplayedFold(Tagging):
    """A fold's tagger without its network: its decoder, calibration and output scheme as the
    fold saved them; its emissions only ever the saved ones, replayed (``DevEmissions``)."""

    def __init__(
        self,
        config: Any,
        decoder: TagDecoder,
        output_scheme: str,
        calibration: dict[str, Any],
        batch_size: int,
    ) -> None:
        self.config = config
        self._decoder = decoder
        self.output_scheme = output_scheme
        self.calibration = calibration
        self._batch_size = batch_size

    @property
    def decoder(self) -> TagDecoder:
        return self.calibrated(self._decoder)

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def emissions(self, indices: Sequence[int], sentences: Sequence[Sequence[str]]) -> np.ndarray:
        raise ValueError("a fold replayed from its saved emissions has no network to run")


def save_held_out(path: Path, model: Tagging, emissions: DevEmissions) -> None:
    """``emissions`` (the fold model's of its held-out sentences) and what decodes them, written
    whole or not at all."""
    from safetensors.numpy import save_file

    decoder = model.decoder
    tensors = emissions.tensors()
    if decoder.crf is not None:
        scores = (decoder.crf.transitions, decoder.crf.start, decoder.crf.end)
        tensors |= {n: np.ascontiguousarray(s) for n, s in zip(CRF_ARRAYS, scores, strict=True)}
    meta = {
        "labels": list(decoder.labels),
        "scheme": decoder.scheme,
        "output_scheme": model.output_scheme,
        "calibration": model.calibration,
        "batch_size": model.batch_size,
    }
    metadata = {"fold": json.dumps(meta)}
    atomic_write(path, lambda temporary: save_file(tensors, temporary, metadata=metadata))


def load_held_out(
    path: Path, sentences: Sequence[Sentence], config: Any
) -> tuple[ReplayedFold, DevEmissions] | None:
    """The fold and its emissions of ``sentences`` as :func:`save_held_out` wrote them, or None
    where the file is not there or not of these sentences (a run of an earlier version)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as opened:
            tensors = {name: opened.get_tensor(name) for name in opened.keys()}  # noqa: SIM118
            meta = json.loads((opened.metadata() or {})["fold"])
    except (OSError, SafetensorError, KeyError, ValueError):
        return None
    emissions = DevEmissions.from_tensors(tensors, sentences)
    if emissions is None:
        return None
    crf = CRFScores(*(tensors[name] for name in CRF_ARRAYS)) if CRF_ARRAYS[0] in tensors else None
    decoder = TagDecoder(meta["labels"], meta["scheme"], crf)
    fold = ReplayedFold(
        config, decoder, meta["output_scheme"], meta["calibration"], meta["batch_size"]
    )
    return fold, emissions
