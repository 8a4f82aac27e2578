"""Opening a model directory, the one way every model wrapper's ``load`` does: the device
checked, the metadata and vocabularies read, the config rebuilt and checked, each failure said
with the directory's name (``bistack.files.modeldir.reading_model``); the wrapper builds its
network from these and puts the weights into it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bistack.config.files import build_config
from bistack.files.modeldir import load_metadata, load_weights, reading_model
from bistack.models.devices import checked_device


@dataclass(frozen=True)
class SavedModel:
    """A model directory being opened: ``meta`` (config.json: the config as written, outputs,
    calibration...), ``vocab`` (vocab.json), the rebuilt ``config``, and the ``device`` it is
    loaded onto."""

    path: Path
    meta: dict[str, Any]
    vocab: dict[str, Any]
    config: Any
    device: torch.device

    def weights_into(self, network: nn.Module) -> nn.Module:
        """``network`` with the directory's weights (safetensors), on the device."""
        load_weights(self.path, network)
        return network.to(self.device)


@contextmanager
def opening(
    path: str | Path, kind: str, config_class: type, device: str | torch.device
) -> Iterator[SavedModel]:
    """The model directory at ``path``, holding a model of ``kind`` whose config is a
    ``config_class``, opened for loading onto ``device`` (one this machine lacks is an error
    before anything is read)."""
    chosen = checked_device(device)
    with reading_model(path):
        meta, vocab = load_metadata(path, kind)
        config = build_config(config_class, meta["config"], source=f"{path}/config.json")
        yield SavedModel(Path(path), meta, vocab, config, chosen)
