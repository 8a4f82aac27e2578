"""Evaluation mode for a while, restored afterwards even when the work inside fails; a network's
outputs as the arrays the shared output math reads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """``model.eval()`` inside the block; its training flag as it was afterwards. A model
    already in evaluation mode throughout is left alone (switching walks every module twice:
    half a millisecond of a single sentence's prediction)."""
    if not any(module.training for module in model.modules()):
        yield model
        return
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


@contextmanager
def predicting(model: nn.Module) -> Iterator[nn.Module]:
    """Evaluation mode and no gradients: how a wrapper runs its network to predict."""
    with torch.no_grad(), evaluating(model):
        yield model


def as_array(tensor: torch.Tensor) -> np.ndarray:
    """A network's output as float32 numpy (on the CPU), for the output math that PyTorch and
    exported models share (``bistack.taggers.emissions.decoding``,
    ``bistack.text_models.outputs``)."""
    return tensor.detach().float().cpu().numpy()
