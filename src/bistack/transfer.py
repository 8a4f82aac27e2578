"""Batches onto the device: a tensor bound for a CUDA device goes through pinned (page-locked)
host memory and is copied without the host waiting (``non_blocking``), so the copy overlaps
the device's work and the host goes on making the next batch (:mod:`bistack.devices.ahead`). A
copy from pageable memory would first be staged through a pinned buffer by the driver, with the
host blocked until it lands. The pinned block stays reserved until the copy is done (PyTorch's
caching host allocator records the copy's stream), so the batch may be dropped at once.
Elsewhere (the CPU, another accelerator) a tensor moves as ``Tensor.to`` moves it.
"""

from __future__ import annotations

import torch
from torch import Tensor

PINNED_DEVICE_TYPES = frozenset({"cuda"})  # where a copy from pinned memory need not block


def to_device(tensor: Tensor, device: torch.device | str) -> Tensor:
    """``tensor`` on ``device``; a host tensor bound for a CUDA device pinned first and copied
    without waiting (the device's work queued after it still reads it whole)."""
    target = torch.device(device)
    if target.type in PINNED_DEVICE_TYPES and tensor.device.type == "cpu":
        return tensor.pin_memory().to(target, non_blocking=True)
    return tensor.to(target)
