"""Recurrent text classifiers and regressors a user loads: ``Classifier.load(path).predict([...])``.

Embeddings, a recurrent encoder and a pooling over its states (a BiLSTM with additive attention
by default); what the outputs mean is ``bistack.text_models.outputs``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor

from bistack.data.batching import TextBatch, collate_tokens
from bistack.data.buckets import bucket_batches
from bistack.data.features import TokenVocabularies
from bistack.data.tokenize import Token, tokenize_text
from bistack.devices.ahead import overlapped
from bistack.errors import DataError
from bistack.files.formats import shown
from bistack.files.modeldir import (
    save_metadata,
)
from bistack.models.mode import as_array, evaluating
from bistack.models.saved import SavedKind, SavedModel
from bistack.text_models.base import Regression, TextModelBase
from bistack.text_models.config import ClassifierConfig, RegressorConfig, TextModelConfig
from bistack.text_models.network import SequenceClassifier, build_classifier
from bistack.text_models.outputs import (
    ClassOutputs,
    Outputs,
    RawOutputs,
    TargetOutputs,
    TextPrediction,
)

__all__ = ["Classifier", "RecurrentTextModel", "Regressor", "TextPrediction"]


class RecurrentTextModel(SavedKind, TextModelBase):
    """A trained recurrent text model with its vocabularies and its outputs' meaning."""

    KIND: ClassVar[str]
    CONFIG: ClassVar[type[TextModelConfig]]
    OUTPUTS: ClassVar[type[ClassOutputs] | type[TargetOutputs]]

    def __init__(
        self,
        model: SequenceClassifier,
        vocabularies: TokenVocabularies,
        config: TextModelConfig,
        outputs: Outputs,
    ) -> None:
        self.model = model.eval()
        self.vocabularies = vocabularies
        self.config = config
        self.outputs = outputs

    @classmethod
    def from_saved(cls, saved: SavedModel) -> RecurrentTextModel:
        vocabularies = TokenVocabularies.from_json(saved.vocab)
        outputs = cls.OUTPUTS(saved.meta["outputs"])
        network = build_classifier(saved.config, vocabularies, len(outputs), loss=outputs.LOSS)
        return cls(saved.weights_into(network), vocabularies, saved.config, outputs)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            self.KIND,
            self.config.to_dict(),
            self.vocabularies.to_json(),
            outputs=self.outputs.info,
        )

    @property
    def attends(self) -> bool:
        """Whether the pooling weighs tokens (additive or dot-product attention)."""
        return self.config.pooling.type in ("additive", "dot")

    def tokenize(self, text: str) -> list[Token]:
        return tokenize_text(text, self.config.data.tokenizer)

    @torch.inference_mode()
    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """Outputs and attention for raw texts, batched by length, returned in input order."""
        batch_size = self.config.train.eval_batch_size if batch_size is None else batch_size
        tokens = [self.tokenize(text) for text in texts]
        for index, text_tokens in enumerate(tokens):
            if not text_tokens:
                raise DataError("input", f"text {index + 1} has no tokens: {texts[index]!r}")
        words = [[t.text for t in ts] for ts in tokens]
        outputs: list[Tensor] = [torch.empty(0)] * len(texts)
        weights: list[list[float]] = [[] for _ in texts]
        padding_mass = 0.0
        device = next(self.model.parameters()).device
        batches = bucket_batches([len(t) for t in tokens], batch_size, shuffle=False)

        def collated() -> Iterator[tuple[list[int], TextBatch, TextBatch]]:
            for indices in shown(batches, progress):
                rows = collate_tokens([words[i] for i in indices], self.vocabularies)
                batch = TextBatch(**vars(rows))
                yield indices, batch, batch.to(device)

        with evaluating(self.model):
            # On a GPU the next batch is collated and copied while this one runs.
            several = len(batches) > 1
            for indices, batch, on_device in overlapped(collated(), device, 2, several):
                result = self.model.predict(on_device)
                # The outputs (batch, classes or targets) beside the attention (batch, seq),
                # when the pooling attends: the batch's one copy to the host.
                width = result.outputs.size(1)
                attended = [] if result.weights is None else [result.weights.float()]
                read = torch.cat([result.outputs.float(), *attended], dim=1).cpu()
                scores = read[:, :width]
                attention = read[:, width:].numpy() if attended else None
                if attention is not None:  # read on the host, with the mask collation built
                    padding_mass += float(attention[~batch.mask.numpy()].sum())
                for row, index in enumerate(indices):
                    outputs[index] = scores[row]
                    if attention is not None:
                        weights[index] = attention[row, : len(tokens[index])].tolist()
        return RawOutputs(
            tokens, as_array(torch.stack(outputs)), weights if self.attends else None, padding_mass
        )


class Classifier(RecurrentTextModel):
    """Predicts one label per text."""

    KIND = "classifier"
    CONFIG = ClassifierConfig
    OUTPUTS = ClassOutputs


class Regressor(Regression, RecurrentTextModel):  # type: ignore[misc]  # see Regression
    """Predicts one or more numeric targets per text, in their original units."""

    KIND = "regressor"
    CONFIG = RegressorConfig
    OUTPUTS = TargetOutputs
