"""The state a training run needs to go on after a stop: written each epoch, read by ``--resume``.

One file, ``checkpoint.safetensors`` in the run's output, beside (never inside) the best model.
Its tensors: the network's current trained weights and buffers, the optimizer's state, the
random generators' states, and the running weight average when ``train.weight_average`` keeps
one. Its metadata (JSON): the epoch, the early-stopping state, the elapsed time, the
optimizer's settings and the run's config. Nothing is unpickled. It is written to a
temporary file and renamed, so a kill leaves the previous checkpoint or the new one, whole.
With the same config, a resumed run then computes exactly what the uninterrupted run would
have: the batches of an epoch depend only on the seed and the epoch, and dropout draws from the
restored generators.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from bistack.errors import BistackError
from bistack.files.leftovers import leftover_name
from bistack.runs.averaging import WeightAverage

CHECKPOINT = "checkpoint.safetensors"


class CheckpointError(BistackError):
    """No checkpoint to resume from, or one that does not belong to this config."""


@dataclass(frozen=True)
class LoopState:
    """Where the epoch loop stands after ``epoch``: the best dev score and its epoch, epochs
    without improvement, seconds spent, and whether the loop had decided to stop."""

    epoch: int
    best: float
    best_epoch: int
    stale: int
    elapsed: float
    stopped: bool = False


def save_checkpoint(
    directory: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: LoopState,
    config: dict[str, Any],
    inputs: dict[str, str] | None = None,
    average: WeightAverage | None = None,
) -> None:
    """Write ``directory/checkpoint.safetensors`` atomically (temporary file, then rename);
    ``inputs``: the digests of the files the run reads (``bistack.files.fingerprints``)."""
    tensors = {f"model.{name}": value for name, value in changing_state(model).items()}
    averaged, updates = average.state() if average is not None else ({}, 0)
    tensors.update({f"average.{name}": value for name, value in averaged.items()})
    optimizer_state = optimizer.state_dict()
    scalars: dict[str, dict[str, Any]] = {}
    for parameter, values in optimizer_state["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optimizer.{parameter}.{key}"] = value
            else:
                scalars.setdefault(str(parameter), {})[key] = value
    tensors["rng.torch"] = torch.get_rng_state()
    numpy_state: tuple[Any, ...] = tuple(np.random.get_state())
    tensors["rng.numpy"] = torch.from_numpy(np.asarray(numpy_state[1], dtype=np.int64))
    python_state = random.getstate()
    meta = {
        "state": asdict(state),
        "config": config,
        "inputs": inputs or {},
        "average_updates": updates,
        "param_groups": optimizer_state["param_groups"],
        "optimizer_scalars": scalars,
        "rng_python": [python_state[0], list(python_state[1]), python_state[2]],
        "rng_numpy": [numpy_state[0], *[_plain(v) for v in numpy_state[2:]]],
    }
    tensors = {name: value.detach().contiguous().cpu() for name, value in tensors.items()}
    path = directory / CHECKPOINT
    temporary = directory / leftover_name(CHECKPOINT, "tmp", os.getpid())
    directory.mkdir(parents=True, exist_ok=True)
    try:
        save_file(tensors, temporary, metadata={"bistack": json.dumps(meta)})
    except SafetensorError as error:  # safetensors reports a full disk as its own error
        temporary.unlink(missing_ok=True)
        raise CheckpointError(f"{path}: cannot write the checkpoint ({error})") from None
    os.replace(temporary, path)


@dataclass
class Checkpoint:
    """A checkpoint read back: its tensors and its JSON metadata."""

    path: Path
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any]

    @property
    def state(self) -> LoopState:
        return LoopState(**self.meta["state"])

    @property
    def config(self) -> dict[str, Any]:
        return self.meta["config"]

    @property
    def inputs(self) -> dict[str, str]:
        """The digests of the files the run read when it wrote this (none before they were
        kept)."""
        return dict(self.meta.get("inputs", {}))

    def restore(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        average: WeightAverage | None = None,
    ) -> None:
        """Put the weights, the optimizer's state, the generators' states and the weight
        average back; what does not fit is a CheckpointError naming the file, never torch's."""
        try:
            self._restore(model, optimizer)
            if average is not None:
                average.load(
                    {
                        name.removeprefix("average."): value
                        for name, value in self.tensors.items()
                        if name.startswith("average.")
                    },
                    self.meta.get("average_updates", 0),
                )
        except CheckpointError:
            raise
        except (KeyError, ValueError, TypeError, RuntimeError, IndexError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise CheckpointError(
                f"{self.path}: damaged, or written for another model ({first}); start again "
                "with --overwrite"
            ) from None

    def _restore(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        weights = {
            name.removeprefix("model."): value
            for name, value in self.tensors.items()
            if name.startswith("model.")
        }
        expected = changing_state(model)
        unknown = set(weights) - set(expected)
        if unknown:
            raise CheckpointError(
                f"{self.path}: holds weights this model does not have ({sorted(unknown)[0]}...)"
            )
        for name, value in weights.items():
            if value.shape != expected[name].shape:
                raise CheckpointError(
                    f"{self.path}: its {name} is {tuple(value.shape)}, this model's is "
                    f"{tuple(expected[name].shape)}: the data or its vocabulary changed since "
                    "the checkpoint; --resume needs the same data (or start again with "
                    "--overwrite)"
                )
        model.load_state_dict(weights, strict=False)
        state: dict[int, dict[str, Any]] = {}
        for name, value in self.tensors.items():
            if name.startswith("optimizer."):
                _, parameter, key = name.split(".", 2)
                state.setdefault(int(parameter), {})[key] = value
        for parameter, values in self.meta["optimizer_scalars"].items():
            state.setdefault(int(parameter), {}).update(values)
        optimizer.load_state_dict({"state": state, "param_groups": self.meta["param_groups"]})
        torch.set_rng_state(self.tensors["rng.torch"])
        version, keys, gauss = self.meta["rng_python"]
        random.setstate((version, tuple(keys), gauss))
        kind, *rest = self.meta["rng_numpy"]
        np.random.set_state((kind, self.tensors["rng.numpy"].numpy().astype(np.uint32), *rest))


def load_checkpoint(directory: Path) -> Checkpoint:
    """The checkpoint in ``directory``; a missing or unreadable one is a CheckpointError."""
    path = directory / CHECKPOINT
    if not path.exists():
        raise CheckpointError(
            f"{directory}: no checkpoint to resume from (a run writes one after each epoch, "
            "once it has its first best model, and a run that finished removes it); train "
            "without --resume"
        )
    try:
        tensors = load_file(path)
        with safe_open(path, "pt") as handle:
            meta = json.loads((handle.metadata() or {})["bistack"])
    except (SafetensorError, OSError, ValueError, KeyError) as error:
        raise CheckpointError(f"{path}: not a readable bistack checkpoint ({error})") from None
    check_checkpoint(path, tensors, meta)
    return Checkpoint(path, tensors, meta)


META_KEYS = ("state", "config", "param_groups", "optimizer_scalars", "rng_python", "rng_numpy")


def check_checkpoint(path: Path, tensors: dict[str, torch.Tensor], meta: Any) -> None:
    """A CheckpointError naming what is damaged: missing records, a state that is not one,
    weights that are not finite (a run that diverged writes none: these were damaged after)."""
    missing = [key for key in META_KEYS if not isinstance(meta, dict) or key not in meta]
    missing += [name for name in ("rng.torch", "rng.numpy") if name not in tensors]
    if missing:
        raise CheckpointError(f"{path}: damaged: it lacks {', '.join(missing)}")
    try:
        LoopState(**meta["state"])
    except TypeError as error:
        raise CheckpointError(f"{path}: damaged: its loop state is not one ({error})") from None
    for name, value in tensors.items():
        weight = name.startswith("model.") and value.is_floating_point()
        if weight and not bool(value.isfinite().all()):
            raise CheckpointError(
                f"{path}: damaged: weight {name.removeprefix('model.')} holds values that "
                "are not finite (a diverged run writes no checkpoint); start again with "
                "--overwrite"
            )


def changing_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What training changes: trained parameters and buffers. A frozen backbone or frozen
    word vectors are left out: the run's set-up loads them again, as they were."""
    trained = {name: p for name, p in model.named_parameters() if p.requires_grad}
    return {**trained, **dict(model.named_buffers())}


def differences(recorded: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two config dicts."""
    keys = sorted(set(recorded) | set(current))
    found = []
    for key in keys:
        one, two = recorded.get(key), current.get(key)
        if isinstance(one, dict) and isinstance(two, dict):
            found += differences(one, two, f"{prefix}{key}.")
        elif one != two:
            found.append(f"{prefix}{key} ({one!r} -> {two!r})")
    return found


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
