"""Classifiers and regressors over a transformer's layers, behind the same API as the recurrent
ones: ``Classifier.load(path)`` returns a :class:`LayerPoolingClassifier` when the model
directory holds one.

A frozen-backbone model directory holds the head only, and names its backbone folder with a
fingerprint of its files, checked on load. A fine-tuned one also holds the tuned backbone in
``backbone/`` (HuggingFace's own safetensors format), so it loads without the original.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from bistack.api.text import Classifier, RawOutputs, Regressor, TextModel
from bistack.config import BackboneConfig, LayerPoolingTextConfig, config_from_dict
from bistack.errors import DataError, ModelFileError
from bistack.feature_cache import model_fingerprint
from bistack.modeldir import load_weights, save_metadata, save_weights
from bistack.models.backbone import LayerVectors, TransformerBackbone
from bistack.models.layer_pooling_model import LayerPoolingModel, build_layer_pooling_model

BACKBONE_DIR = "backbone"


class LayerPoolingTextModel(TextModel):
    """A trained layer-pooling head with its backbone and label/target metadata."""

    # Replaces, not extends, the recurrent model's state: there are no vocabularies.
    def __init__(
        self,
        model: LayerPoolingModel,
        backbone: TransformerBackbone,
        config: LayerPoolingTextConfig,
        outputs: dict[str, Any],
    ) -> None:
        self.model = model.eval()
        self.backbone = backbone.eval()
        self.config = config  # type: ignore[assignment]
        self.output_info = outputs

    def save_metadata(self, path: str | Path) -> None:
        """config.json (with the backbone's fingerprint) and an empty vocab.json."""
        save_metadata(
            path,
            self.KIND,
            self.config.to_dict(),
            {},
            outputs=self.output_info,
            backbone=backbone_record(self.backbone),
        )

    def save_weights(self, path: str | Path) -> None:
        save_head_and_backbone(path, self.model, self.backbone, self.config.backbone.finetune)

    def layer_vectors(self, texts: Sequence[str]) -> LayerVectors:
        for index, text in enumerate(texts):
            if not text.strip():
                raise DataError("input", f"text {index + 1} is empty")
        options = self.config.backbone
        return self.backbone.layer_vectors(
            texts,
            options.long_texts,
            stride=options.stride,
            max_length=options.max_length,
            batch_size=options.batch_size,
        )

    @torch.inference_mode()
    def outputs(self, vectors: LayerVectors) -> RawOutputs:
        """Outputs for texts whose per-layer vectors are known (e.g. from the feature cache)."""
        was_training = self.model.training
        self.model.eval()
        outputs = self.model.outputs_from_layers(vectors.of(self.model.features))
        self.model.train(was_training)
        return RawOutputs([[] for _ in range(len(outputs))], outputs, None, 0.0)

    def run(self, texts: Sequence[str], batch_size: int | None = None) -> RawOutputs:
        """Outputs for raw texts: backbone, then the head (no token attention to report)."""
        return self.outputs(self.layer_vectors(texts))


class LayerPoolingClassifier(LayerPoolingTextModel, Classifier):
    """Predicts one label per text from a transformer's layers."""


class LayerPoolingRegressor(LayerPoolingTextModel, Regressor):
    """Predicts numeric targets per text from a transformer's layers."""


def backbone_record(backbone: TransformerBackbone) -> dict[str, str]:
    """What config.json says of the backbone: its folder and the fingerprint checked on load."""
    return {"folder": str(backbone.folder), "fingerprint": model_fingerprint(backbone.folder)}


def save_head_and_backbone(
    path: str | Path, head: torch.nn.Module, backbone: TransformerBackbone, finetune: bool
) -> None:
    """The head as safetensors; a fine-tuned backbone into ``backbone/``, swapped in whole."""
    save_weights(path, head, exclude_prefix="backbone.")
    if finetune:
        save_backbone(backbone, Path(path) / BACKBONE_DIR)


def save_backbone(backbone: TransformerBackbone, target: Path) -> None:
    """Write the backbone's weights and tokenizer to ``target``, replacing it only when done."""
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        backbone.model.save_pretrained(staging)
        backbone.tokenizer.save_pretrained(staging)
        old = target.with_name(f".{target.name}.old")
        if target.exists():
            target.rename(old)
        staging.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def load_saved_backbone(
    directory: Path, options: BackboneConfig, meta: dict[str, Any]
) -> TransformerBackbone:
    """The tuned backbone saved with a model, or the frozen one it names, checked unchanged."""
    if options.finetune:
        return TransformerBackbone.load(str(directory / BACKBONE_DIR))
    backbone = TransformerBackbone.load(options.path)
    if meta.get("backbone", {}).get("fingerprint") != model_fingerprint(backbone.folder):
        raise ModelFileError(
            f"{directory}: its backbone {backbone.folder} has changed since training "
            "(the files' fingerprint differs); retrain, or point backbone.path at the original"
        )
    return backbone


def load_layer_pooling_model(
    path: str | Path, kind: str, meta: dict[str, Any]
) -> LayerPoolingTextModel:
    """Rebuild a layer-pooling model directory written by ``bistack train``."""
    directory = Path(path)
    config = config_from_dict(meta["config"], source=f"{directory}/config.json")
    assert isinstance(config, LayerPoolingTextConfig)
    backbone = load_saved_backbone(directory, config.backbone, meta)
    outputs = meta["outputs"]
    count = len(outputs["labels"]) if "labels" in outputs else len(outputs["targets"])
    model = build_layer_pooling_model(config, backbone.num_layers, backbone.hidden_size, count)
    load_weights(directory, model)
    if config.backbone.finetune:
        model.backbone = backbone
    model_class = LayerPoolingClassifier if kind == Classifier.KIND else LayerPoolingRegressor
    return model_class(model, backbone, config, outputs)
