"""The recurrent tagger a user loads: ``Tagger.load(path).predict(["Washington signed ..."])``."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from bistack.data.batching import collate_tokens
from bistack.data.features import TokenVocabularies
from bistack.files.modeldir import (
    checked_output_scheme,
    save_metadata,
)
from bistack.models.mode import predicting
from bistack.models.saved import SavedKind, SavedModel
from bistack.taggers.config import TaggerConfig
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.emissions.device_decoding import DeviceDecoding
from bistack.taggers.models.tagging import Emitter, host_array
from bistack.taggers.networks.network import SequenceTagger, build_tagger

if TYPE_CHECKING:
    from bistack.taggers.networks.streaming import StreamingTagger

KIND = "tagger"


class Tagger(SavedKind, DeviceDecoding):
    """A trained sequence tagger with its vocabularies; tags in the scheme of its training data."""

    KIND = KIND
    CONFIG = TaggerConfig

    def __init__(
        self,
        model: SequenceTagger,
        vocabularies: TokenVocabularies,
        config: TaggerConfig,
        output_scheme: str,
        calibration: dict[str, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        self.vocabularies = vocabularies
        self.config = config
        self.output_scheme = output_scheme
        self.calibration = dict(calibration or {})

    @classmethod
    def from_saved(cls, saved: SavedModel) -> Tagger:
        vocabularies = TokenVocabularies.from_json(saved.vocab)
        model = saved.weights_into(build_tagger(saved.config, vocabularies))
        scheme = checked_output_scheme(saved.path, saved.meta)
        calibration = saved.meta.get("calibration")
        return cls(model, vocabularies, saved.config, scheme, calibration)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            KIND,
            self.config.to_dict(),
            self.vocabularies.to_json(),
            output_scheme=self.output_scheme,
            **({"calibration": self.calibration} if self.calibration else {}),
        )

    @property
    def decoder(self) -> TagDecoder:
        return self.calibrated(self.model.head.decoder())

    @property
    def batch_size(self) -> int:
        return self.config.train.eval_batch_size

    def predicting(self) -> AbstractContextManager[Any]:
        return predicting(self.model)

    @property
    def device(self) -> str:
        return str(next(self.model.parameters()).device)

    def emissions(self, indices: Sequence[int], sentences: Sequence[Sequence[str]]) -> np.ndarray:
        return host_array(self.network_emissions(indices, sentences))

    def network_emissions(
        self, indices: Sequence[int], sentences: Sequence[Sequence[str]]
    ) -> torch.Tensor:
        """The network's emissions ``(batch, seq_len, num_tags)`` of one batch of
        ``sentences``, left on its device."""
        batch = collate_tokens(sentences, self.vocabularies)
        device = next(self.model.parameters()).device
        return self.model.emissions(batch.to(device))

    def emitter_of(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[Any] | None
    ) -> Emitter:
        """The network's pass over each batch, its emissions left on its device."""
        return self.network_emissions

    def streamer(self) -> StreamingTagger:
        """Tags token by token as they arrive (``predict --stream``); a unidirectional tagger
        only."""
        from bistack.taggers.networks.streaming import StreamingTagger

        return StreamingTagger(self)
