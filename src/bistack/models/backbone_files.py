"""How a model over a transformer keeps its backbone in its model directory.

A frozen-backbone directory holds the head only, and names its backbone folder with a fingerprint
of its files, checked on load. A fine-tuned one also holds the tuned backbone in ``backbone/``
(HuggingFace's own safetensors format), so it loads without the original. One whose top K layers
trained (``backbone.finetune: K``) holds those layers alone (``top_layers.safetensors``), read
over the original's, which it names as a frozen one does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from bistack.config import BackboneConfig
from bistack.errors import ModelFileError
from bistack.files.modeldir import atomic_write, save_weights
from bistack.files.swap import atomic_folder
from bistack.models.backbone import TransformerBackbone
from bistack.models.boundary import top_layer_names
from bistack.models.feature_cache import model_fingerprint

BACKBONE_DIR = "backbone"
TOP_LAYERS_FILE = "top_layers.safetensors"


def backbone_record(backbone: TransformerBackbone) -> dict[str, str]:
    """What config.json says of the backbone: its folder and the fingerprint checked on load."""
    return {"folder": str(backbone.folder), "fingerprint": model_fingerprint(backbone.folder)}


def save_head_and_backbone(
    path: str | Path, head: torch.nn.Module, backbone: TransformerBackbone, finetune: bool | int
) -> None:
    """The head as safetensors; a fine-tuned backbone into ``backbone/``, swapped in whole, or
    (``finetune``: K, fewer than its layers) its top K layers alone."""
    save_weights(path, head, exclude_prefix="backbone.")
    top = None if isinstance(finetune, bool) else finetune
    if top is not None and top < backbone.num_layers:
        model = backbone.model
        state = model.state_dict()
        names = top_layer_names(model, backbone.num_layers - top)
        tensors = {name: state[name].detach().contiguous().cpu() for name in names}
        target = Path(path) / TOP_LAYERS_FILE
        atomic_write(target, lambda temporary: save_file(tensors, temporary))
    elif finetune:
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
    top = options.top_layers
    if options.finetune and top is None:
        return TransformerBackbone.load(str(directory / BACKBONE_DIR))
    if top is not None:  # its own copy: the trained top layers go into it
        loaded = None
    backbone = loaded if loaded is not None else TransformerBackbone.load(options.path)
    if meta.get("backbone", {}).get("fingerprint") != model_fingerprint(backbone.folder):
        raise ModelFileError(
            f"{directory}: its backbone {backbone.folder} has changed since training "
            "(the files' fingerprint differs); retrain, or point backbone.path at the original"
        )
    if top is not None and top >= backbone.num_layers:  # every layer: fine-tuned whole
        return TransformerBackbone.load(str(directory / BACKBONE_DIR))
    if top is not None:
        with_top_layers(backbone, top, directory / TOP_LAYERS_FILE)
    return backbone


def with_top_layers(backbone: TransformerBackbone, top: int, path: Path) -> None:
    """``backbone`` with its top ``top`` layers' weights read from ``path`` (a top-K model's);
    a file that holds other weights than those layers' is an error naming it."""
    model = backbone.model
    expected = top_layer_names(model, backbone.num_layers - top)
    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as error:
        raise ModelFileError(f"{path}: cannot read the trained top layers ({error})") from None
    if sorted(tensors) != sorted(expected):
        raise ModelFileError(
            f"{path}: holds {len(tensors)} weights, not the {len(expected)} of the top {top} "
            f"layers of {backbone.folder}; retrain, or point backbone.path at the original"
        )
    model.load_state_dict(tensors, strict=False)
