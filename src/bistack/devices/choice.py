"""Which device a model goes to: one this machine has, or a clear error that says so (never a
failure deep inside torch, blamed on the model's files)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import torch
from torch import nn

from bistack.errors import ConfigError


def checked_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device this machine has; a ConfigError naming it otherwise."""
    try:
        chosen = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ConfigError(f"device {device}: not a device (cpu, cuda, cuda:1, mps, ...)") from None
    if chosen.type == "meta":
        raise ConfigError(
            f"device {device}: holds shapes, not numbers, so a model there cannot predict; "
            "give cpu, cuda, cuda:1, mps, ..."
        )
    if chosen.type == "cuda" and (
        not torch.cuda.is_available() or (chosen.index or 0) >= torch.cuda.device_count()
    ):
        raise ConfigError(f"device {device}: no such CUDA device on this machine")
    if chosen.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device {device}: MPS is not available on this machine")
    return chosen


MatmulPrecision = Literal["highest", "high", "medium"]


def set_matmul_precision(device: str | torch.device, precision: MatmulPrecision = "high") -> None:
    """float32 matrix products on a CUDA device at ``precision``: "high" (the default of
    bistack's commands) lets Ampere and later GPUs use TF32 tensor cores, several times faster
    for a transformer and within its training noise; "highest" keeps full float32. Nothing
    changes for the CPU."""
    if torch.device(device).type == "cuda":
        torch.set_float32_matmul_precision(precision)


@contextmanager
def moved_to(module: nn.Module, device: str | torch.device) -> Iterator[nn.Module]:
    """``module`` on ``device`` inside the block, and back where it was afterwards: a frozen
    backbone computes its cached vectors on the run's GPU, then leaves the GPU's memory to
    training."""
    before = next(module.parameters()).device
    module.to(device)
    try:
        yield module
    finally:
        module.to(before)
