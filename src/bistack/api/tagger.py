"""The recurrent tagger a user loads: ``Tagger.load(path).predict(["Washington signed ..."])``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from bistack.api.predictor import shown
from bistack.api.tagging import (
    SentenceAnalysis,
    Tagging,
    analyse_batch,
    in_output_scheme,
)
from bistack.config import TaggerConfig, build_config
from bistack.data.batching import collate_tagging
from bistack.data.buckets import bucket_batches
from bistack.data.features import TokenVocabularies
from bistack.modeldir import load_metadata, load_weights, reading_model, save_metadata, save_weights
from bistack.models.mode import evaluating
from bistack.models.tagger import SequenceTagger, build_tagger

KIND = "tagger"


class Tagger(Tagging):
    """A trained sequence tagger with its vocabularies; tags in the scheme of its training data."""

    KIND = KIND

    def __init__(
        self,
        model: SequenceTagger,
        vocabularies: TokenVocabularies,
        config: TaggerConfig,
        output_scheme: str,
    ) -> None:
        self.model = model.eval()
        self.vocabularies = vocabularies
        self.config = config
        self.output_scheme = output_scheme

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> Tagger:
        """Load a model directory written by ``bistack train`` (no unpickling), onto
        ``device`` (predictions build their batches there)."""
        with reading_model(path):
            meta, vocab = load_metadata(path, KIND)
            config = build_config(TaggerConfig, meta["config"], source=f"{path}/config.json")
            vocabularies = TokenVocabularies.from_json(vocab)
            model = build_tagger(config, vocabularies)
            load_weights(path, model)
            return cls(model.to(device), vocabularies, config, meta["output_scheme"])

    @property
    def labels(self) -> list[str]:
        """The tags the model predicts, in the scheme it was trained in."""
        return list(self.vocabularies.tags.items)

    def save(self, path: str | Path) -> None:
        self.save_metadata(path)
        self.save_weights(path)

    def save_weights(self, path: str | Path) -> None:
        save_weights(path, self.model)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            KIND,
            self.config.to_dict(),
            self.vocabularies.to_json(),
            output_scheme=self.output_scheme,
        )

    @torch.no_grad()  # not inference mode: the CRF's marginals are a gradient
    def _analyse(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None,
        confidence: bool,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[SentenceAnalysis]:
        batch_size = batch_size or self.config.train.eval_batch_size
        encoded = [self.vocabularies.encode(tokens) for tokens in sentences]
        by_index: dict[int, SentenceAnalysis] = {}
        labels = self.vocabularies.tags.items
        device = next(self.model.parameters()).device
        with evaluating(self.model):
            batches = bucket_batches([len(s) for s in sentences], batch_size, shuffle=False)
            for indices in shown(batches, progress):
                if any(not sentences[i] for i in indices):
                    raise ValueError("cannot tag an empty sentence")
                batch = collate_tagging([encoded[i] for i in indices], self.vocabularies)
                analyses = analyse_batch(self.model, batch.to(device), confidence, top_k)
                for index, analysis in zip(indices, analyses, strict=True):
                    by_index[index] = in_output_scheme(analysis, labels, self.output_scheme)
        return [by_index[i] for i in range(len(sentences))]
