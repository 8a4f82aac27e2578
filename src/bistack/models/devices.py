"""Which device a model goes to: one this machine has, or a clear error that says so (never a
failure deep inside torch, blamed on the model's files)."""

from __future__ import annotations

import torch

from bistack.errors import ConfigError


def checked_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device this machine has; a ConfigError naming it otherwise."""
    try:
        chosen = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ConfigError(f"device {device}: not a device (cpu, cuda, cuda:1, mps, ...)") from None
    if chosen.type == "cuda" and (
        not torch.cuda.is_available() or (chosen.index or 0) >= torch.cuda.device_count()
    ):
        raise ConfigError(f"device {device}: no such CUDA device on this machine")
    if chosen.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device {device}: MPS is not available on this machine")
    return chosen
