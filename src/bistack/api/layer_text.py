"""Classifiers and regressors over a transformer's layers: ``LayerPoolingClassifier.load(path)``.

Siblings of the recurrent text models: the same predictions and scores (``api.text_outputs``),
computed from a backbone's per-layer vectors instead of word vocabularies. How the backbone is
kept in the model directory is ``api.backbone_files``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import torch

from bistack.api.backbone_files import backbone_record, load_saved_backbone, save_head_and_backbone
from bistack.api.text_outputs import (
    ClassOutputs,
    Outputs,
    RawOutputs,
    Regression,
    TargetOutputs,
    TextModelBase,
)
from bistack.config import LayerPoolingTextConfig, build_config
from bistack.errors import DataError
from bistack.modeldir import load_metadata, load_weights, reading_model, save_metadata
from bistack.models.backbone import LayerVectors, TransformerBackbone
from bistack.models.layer_pooling_model import LayerPoolingModel, build_layer_pooling_model
from bistack.models.mode import evaluating


class LayerPoolingTextModel(TextModelBase):
    """A trained layer-pooling head with its backbone and its outputs' meaning."""

    KIND: ClassVar[str]
    OUTPUTS: ClassVar[type[ClassOutputs] | type[TargetOutputs]]
    attends = False  # it pools over layers, not tokens: no token weights to show

    def __init__(
        self,
        model: LayerPoolingModel,
        backbone: TransformerBackbone,
        config: LayerPoolingTextConfig,
        outputs: Outputs,
    ) -> None:
        self.model = model.eval()
        self.backbone = backbone.eval()
        self.config = config
        self.outputs = outputs

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> LayerPoolingTextModel:
        """Load a model directory written by ``bistack train`` (no unpickling), onto
        ``device`` (predictions build their batches there)."""
        with reading_model(path):
            directory = Path(path)
            meta, _ = load_metadata(directory, cls.KIND)
            config = build_config(
                LayerPoolingTextConfig, meta["config"], source=f"{directory}/config.json"
            )
            backbone = load_saved_backbone(directory, config.backbone, meta)
            outputs = cls.OUTPUTS(meta["outputs"])
            model = build_layer_pooling_model(
                config,
                backbone.num_layers,
                backbone.hidden_size,
                len(outputs),
                regression=outputs.REGRESSES,
            )
            load_weights(directory, model)
            if config.backbone.finetune:
                model.backbone = backbone
            model.to(device)
            backbone.to(device)
            return cls(model, backbone, config, outputs)

    def save_metadata(self, path: str | Path) -> None:
        """config.json (with the backbone's fingerprint) and an empty vocab.json."""
        save_metadata(
            path,
            self.KIND,
            self.config.to_dict(),
            {},
            outputs=self.outputs.info,
            backbone=backbone_record(self.backbone),
        )

    def save_weights(self, path: str | Path) -> None:
        save_head_and_backbone(path, self.model, self.backbone, self.config.backbone.finetune)

    def layer_vectors(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> LayerVectors:
        """Per-layer vectors of raw texts, ``batch_size`` texts per backbone forward."""
        for index, text in enumerate(texts):
            if not text.strip():
                raise DataError("input", f"text {index + 1} is empty")
        options = self.config.backbone
        return self.backbone.layer_vectors(
            texts,
            options.long_texts,
            stride=options.stride,
            max_length=options.max_length,
            batch_size=batch_size or options.batch_size,
            progress=progress,
        )

    @torch.inference_mode()
    def outputs_of(self, vectors: LayerVectors) -> RawOutputs:
        """Outputs for texts whose per-layer vectors are known (e.g. from the feature cache)."""
        device = next(self.model.parameters()).device
        with evaluating(self.model):
            layers = vectors.of(self.model.features).to(device)
            outputs = self.model.outputs_from_layers(layers).cpu()
        return RawOutputs([[] for _ in range(len(outputs))], outputs, None, 0.0)

    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        """Outputs for raw texts: backbone, then the head (no token attention to report)."""
        return self.outputs_of(self.layer_vectors(texts, batch_size, progress))


class LayerPoolingClassifier(LayerPoolingTextModel):
    """Predicts one label per text from a transformer's layers."""

    KIND = "layer_classifier"
    OUTPUTS = ClassOutputs


class LayerPoolingRegressor(Regression, LayerPoolingTextModel):
    """Predicts numeric targets per text from a transformer's layers."""

    KIND = "layer_regressor"
    OUTPUTS = TargetOutputs
