"""Classifiers and regressors over a transformer's layers: ``LayerPoolingClassifier.load(path)``.

Siblings of the recurrent text models: the same predictions and scores
(``bistack.text_models.outputs``), computed from a backbone's per-layer vectors, and, for a
model that stacks them (``features`` in its config), from the texts' own token features too.
How the backbone is kept in the model directory is ``bistack.models.backbone_files``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from bistack.data.batching import TokenBatch, collate_tokens
from bistack.data.features import TokenVocabularies
from bistack.data.tokenize import tokenize_text
from bistack.errors import DataError
from bistack.files.modeldir import save_metadata
from bistack.models.backbone import LayerVectors, TransformerBackbone
from bistack.models.backbone_files import (
    backbone_record,
    load_saved_backbone,
    save_head_and_backbone,
)
from bistack.models.frozen_pass import FrozenPass
from bistack.models.mode import as_array, evaluating
from bistack.models.saved import SavedKind, SavedModel
from bistack.text_models.base import OVER_LAYERS_REFUSAL, Regression, TextModelBase
from bistack.text_models.config import (
    LayerClassifierConfig,
    LayerPoolingTextConfig,
    LayerRegressorConfig,
)
from bistack.text_models.layer_network import LayerPoolingModel, build_layer_pooling_model
from bistack.text_models.outputs import ClassOutputs, Outputs, RawOutputs, TargetOutputs
from bistack.transfer import to_device


class LayerPoolingTextModel(SavedKind, TextModelBase):
    """A trained layer-pooling head with its backbone and its outputs' meaning."""

    KIND: ClassVar[str]
    CONFIG: ClassVar[type[LayerPoolingTextConfig]]
    OUTPUTS: ClassVar[type[ClassOutputs] | type[TargetOutputs]]
    attends = False  # it pools over layers, not tokens: no token weights to show

    def attention_refusal(self) -> str:
        return OVER_LAYERS_REFUSAL

    def __init__(
        self,
        model: LayerPoolingModel,
        backbone: TransformerBackbone,
        config: LayerPoolingTextConfig,
        outputs: Outputs,
        vocabularies: TokenVocabularies | None = None,
    ) -> None:
        self.model = model.eval()
        self.backbone = backbone.eval()
        self.config = config
        self.outputs = outputs
        self.vocabularies = vocabularies  # of the stacked token features, if any

    @classmethod
    def from_saved(
        cls, saved: SavedModel, backbone: TransformerBackbone | None = None
    ) -> LayerPoolingTextModel:
        """``backbone``: the frozen backbone the directory names, when the caller holds it
        already (checked by its fingerprint, and moved to the device); a fine-tuned one always
        comes from the directory."""
        config = saved.config
        backbone = load_saved_backbone(saved.path, config.backbone, saved.meta, backbone)
        outputs = cls.OUTPUTS(saved.meta["outputs"])
        vocabularies = (
            TokenVocabularies.from_json(saved.vocab) if config.features is not None else None
        )
        model = saved.weights_into(
            build_layer_pooling_model(
                config,
                backbone.num_layers,
                backbone.hidden_size,
                len(outputs),
                loss=outputs.LOSS,
                vocabularies=vocabularies,
            )
        )
        if config.backbone.finetune:
            model.backbone = backbone
        backbone.to(saved.device)
        return cls(model, backbone, config, outputs, vocabularies)

    def save_metadata(self, path: str | Path) -> None:
        """config.json (with the backbone's fingerprint) and vocab.json (empty unless the
        model stacks token features)."""
        save_metadata(
            path,
            self.KIND,
            self.config.to_dict(),
            self.vocabularies.to_json() if self.vocabularies else {},
            outputs=self.outputs.info,
            backbone=backbone_record(self.backbone),
        )

    def save_weights(self, path: str | Path) -> None:
        save_head_and_backbone(path, self.model, self.backbone, self.config.backbone.finetune)

    def layer_vectors(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> LayerVectors:
        """Per-layer vectors of raw texts, ``batch_size`` texts per backbone forward."""
        self.refuse_empty(texts)
        options = self.config.backbone
        return self.backbone.layer_vectors(
            texts,
            options.long_texts,
            stride=options.stride,
            max_length=options.max_length,
            batch_size=options.batch_size if batch_size is None else batch_size,
            frozen=FrozenPass.of(options),
            progress=progress,
        )

    def token_features(self, texts: Sequence[str]) -> TokenBatch | None:
        """The stacked token features of raw ``texts``, or None when the model has none."""
        if self.vocabularies is None:
            return None
        tokenized = []
        for index, text in enumerate(texts):
            tokens = [t.text for t in tokenize_text(text, self.config.data.tokenizer)]
            if not tokens:
                raise DataError("input", f"text {index + 1} has no tokens: {text!r}")
            tokenized.append(tokens)
        return collate_tokens(tokenized, self.vocabularies)

    @torch.inference_mode()
    def outputs_of(self, vectors: LayerVectors, texts: Sequence[str]) -> RawOutputs:
        """Outputs for ``texts`` whose per-layer vectors are known (e.g. from the feature
        cache); the texts themselves are read too when the model stacks their features."""
        return self.outputs_of_layers(vectors.of(self.model.features), texts)

    def outputs_of_layers(self, layers: torch.Tensor, texts: Sequence[str]) -> RawOutputs:
        """Outputs for ``texts`` from their vectors of every layer ``(texts, layers, hidden)``
        of the kind the pooler reads."""
        device = next(self.model.parameters()).device
        size = self.config.train.eval_batch_size
        parts = []
        with evaluating(self.model):
            for start in range(0, len(layers), size):
                tokens = self.token_features(texts[start : start + size])
                chosen = to_device(layers[start : start + size], device)
                moved = None if tokens is None else tokens.to(device)
                parts.append(self.model.outputs_from_layers(chosen, moved).float().cpu())
        outputs = (
            as_array(torch.cat(parts)) if parts else np.zeros((0, len(self.outputs)), np.float32)
        )
        return RawOutputs([[] for _ in range(len(outputs))], outputs, None, 0.0)

    def shared_parts(self) -> dict[str, Any]:
        """A frozen backbone, for the other members of its ensemble."""
        return {} if self.config.backbone.finetune else {"backbone": self.backbone}

    def shared_stage_key(self) -> Hashable | None:
        """A frozen backbone read with the same settings gives the same per-layer vectors."""
        if self.config.backbone.finetune:
            return None
        options = self.config.backbone
        frozen = FrozenPass.of(options)
        return frozen.stage_key(
            self.backbone, options.long_texts, options.stride, options.max_length
        )

    def shared_stage(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> LayerVectors:
        return self.layer_vectors(texts, batch_size, progress)

    def run_after(self, stage: LayerVectors, texts: Sequence[str]) -> RawOutputs:
        return self.outputs_of(stage, texts)

    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """Outputs for raw texts: each backbone batch's layer vectors read by the head where
        they are (the batch's one copy to the host: its outputs; no token attention to
        report)."""
        self.refuse_empty(texts)
        options, device = self.config.backbone, next(self.model.parameters()).device
        size = options.batch_size if batch_size is None else batch_size
        outputs: list[torch.Tensor] = [torch.empty(0)] * len(texts)
        batches = self.backbone.layer_batches(
            texts,
            options.long_texts,
            stride=options.stride,
            max_length=options.max_length,
            batch_size=size,
            frozen=FrozenPass.of(options),
            progress=progress,
        )
        with torch.inference_mode(), evaluating(self.model):
            for positions, vectors in batches:
                tokens = self.token_features([texts[i] for i in positions])
                moved = None if tokens is None else tokens.to(device)
                layers = vectors.of(self.model.features).float()
                read = self.model.outputs_from_layers(layers, moved).float().cpu()
                for row, position in enumerate(positions):
                    outputs[position] = read[row]
        stacked = torch.stack(outputs) if outputs else torch.zeros((0, len(self.outputs)))
        return RawOutputs([[] for _ in texts], as_array(stacked), None, 0.0)


class LayerPoolingClassifier(LayerPoolingTextModel):
    """Predicts one label per text from a transformer's layers."""

    KIND = "layer_classifier"
    CONFIG = LayerClassifierConfig
    OUTPUTS = ClassOutputs


class LayerPoolingRegressor(Regression, LayerPoolingTextModel):  # type: ignore[misc]  # see Regression
    """Predicts numeric targets per text from a transformer's layers."""

    KIND = "layer_regressor"
    CONFIG = LayerRegressorConfig
    OUTPUTS = TargetOutputs
