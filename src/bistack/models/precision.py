"""The precision a PyTorch model predicts at: its weights' own (32-bit), or its matrix products
in bfloat16 or float16 under ``torch.autocast``. Torch-free to import, so that the corpus
engine, which also runs exported models without torch, can name it."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Literal

InferencePrecision = Literal["32", "bf16-mixed", "16-mixed"]
INFERENCE_PRECISIONS: tuple[InferencePrecision, ...] = ("32", "bf16-mixed", "16-mixed")


def autocast_for(device: str, precision: InferencePrecision) -> Any:
    """A context for prediction at ``precision`` on ``device``: "32" as the weights are, else
    ``torch.autocast`` in bfloat16 or float16. The outputs the output math reads come back as
    float32 either way (the wrappers convert them)."""
    if precision == "32":
        return nullcontext()
    import torch

    dtype = torch.bfloat16 if precision == "bf16-mixed" else torch.float16
    return torch.autocast(torch.device(device).type, dtype=dtype)
