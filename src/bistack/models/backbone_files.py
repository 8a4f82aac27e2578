"""How a model over a transformer keeps its backbone in its model directory.

A frozen-backbone directory holds the head only, and names its backbone folder with a fingerprint
of its files, checked on load. A fine-tuned one also holds the tuned backbone in ``backbone/``
(HuggingFace's own safetensors format), so it loads without the original.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bistack.config import BackboneConfig
from bistack.errors import ModelFileError
from bistack.files.modeldir import save_weights
from bistack.files.swap import atomic_folder
from bistack.models.backbone import TransformerBackbone
from bistack.models.feature_cache import model_fingerprint

BACKBONE_DIR = "backbone"


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
    with atomic_folder(target) as staging:
        backbone.model.save_pretrained(staging)
        backbone.tokenizer.save_pretrained(staging)


def load_saved_backbone(
    directory: Path,
    options: BackboneConfig,
    meta: dict[str, Any],
    loaded: TransformerBackbone | None = None,
) -> TransformerBackbone:
    """The tuned backbone saved with a model, or the frozen one it names, checked unchanged.
    ``loaded``: that frozen backbone, already in memory (a run's own, a study's shared one), so
    that it is not read again; a fine-tuned backbone is always read from ``directory``."""
    if options.finetune:
        return TransformerBackbone.load(str(directory / BACKBONE_DIR))
    backbone = loaded if loaded is not None else TransformerBackbone.load(options.path)
    if meta.get("backbone", {}).get("fingerprint") != model_fingerprint(backbone.folder):
        raise ModelFileError(
            f"{directory}: its backbone {backbone.folder} has changed since training "
            "(the files' fingerprint differs); retrain, or point backbone.path at the original"
        )
    return backbone
