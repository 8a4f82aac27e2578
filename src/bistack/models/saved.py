"""Opening a model directory, the one way every model wrapper's ``load`` does: the device
checked, the metadata and vocabularies read, the config rebuilt and checked, each failure said
with the directory's name (``bistack.files.modeldir.reading_model``); the wrapper builds its
network from these and puts the weights into it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import torch
from torch import nn

from bistack.config.files import recorded_config
from bistack.config.hub import local_folder
from bistack.devices.choice import checked_device
from bistack.errors import ModelFileError
from bistack.files.ensemble_dir import MEMBERS, is_ensemble
from bistack.files.modeldir import load_metadata, load_weights, reading_model, save_weights

M = TypeVar("M", bound=nn.Module)


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

    def weights_into(self, network: M) -> M:
        """``network`` with the directory's weights (safetensors), on the device."""
        load_weights(self.path, network)
        return network.to(self.device)


@contextmanager
def opening(
    path: str | Path,
    kind: str,
    config_class: type,
    device: str | torch.device,
    meta: dict[str, Any] | None = None,
) -> Iterator[SavedModel]:
    """The model directory at ``path``, holding a model of ``kind`` whose config is a
    ``config_class``, opened for loading onto ``device`` (one this machine lacks is an error
    before anything is read). ``meta``: its config.json as already read (``bistack.predictor``
    reads it once to learn the kind), so that it is not read again."""
    chosen = checked_device(device)
    with reading_model(path):
        meta, vocab = load_metadata(path, kind, meta)
        config: Any = recorded_config(config_class, meta["config"], f"{path}/config.json")
        yield SavedModel(Path(path), meta, vocab, config, chosen)


def refuse_other_folders(folder: str | Path, name: str) -> None:
    """A ModelFileError where ``folder`` holds an ensemble, which ``NAME.load`` cannot return
    (K models, not one), saying what opens it."""
    folder = Path(folder)
    door = f"bistack.api.open_model({str(folder)!r}) opens it as one model to every outlet"
    if is_ensemble(folder):
        members = sorted(p.name for p in (folder / MEMBERS).iterdir() if p.is_dir())
        one = f"; {name}.load opens one member, such as {folder / MEMBERS / members[0]}"
        raise ModelFileError(
            f"{folder} holds an ensemble of {len(members)} model{'s' * (len(members) != 1)}, "
            f"not one {name}: {door}" + (one if members else "")
        )


class SavedKind:
    """What every model class of a kind shares: ``load`` opens its model directory
    (:func:`opening`) and builds the model with the class's ``from_saved``."""

    KIND: ClassVar[str]  # the kind its config.json names
    CONFIG: ClassVar[type]  # its config class

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu", **parts: Any) -> Self:
        """Load a model directory written by ``bistack train`` (no unpickling), onto
        ``device`` (predictions build their batches there); ``path`` may be a HuggingFace hub
        id (``org/name[@revision]``, from the hub's cache). ``parts``: what the caller holds
        already, where the class takes it (a frozen ``backbone``). An ensemble's directory is
        refused, naming the door that opens it."""
        folder = local_folder(path)
        refuse_other_folders(folder, cls.__name__)
        with opening(folder, cls.KIND, cls.CONFIG, device) as saved:
            return cls.from_saved(saved, **parts)

    @classmethod
    def from_saved(cls, saved: SavedModel) -> Self:
        """The model built from an opened directory, its weights in place."""
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Its model directory at ``path``: config.json and vocab.json, then the weights."""
        self.save_metadata(path)
        self.save_weights(path)

    def save_metadata(self, path: str | Path) -> None:
        """config.json (the kind, its config, what its outputs mean) and vocab.json."""
        raise NotImplementedError

    def save_weights(self, path: str | Path) -> None:
        """Its network's weights (``self.model``) as safetensors."""
        save_weights(path, self.model)  # type: ignore[attr-defined]  # each kind types its own
