"""Mixed precision that leaves the batch as collated: Fabric's own plugin casts every float in
a module's inputs to the half type before the forward, so a regression target reaches the loss
rounded to bfloat16 (3 significant digits; above 65,504 in float16, infinite) and cached
float32 features lose their precision before any op asks for it. Autocast already runs each op
in the half type where that is safe; the inputs need no cast of their own."""

from __future__ import annotations

from typing import Any

from lightning_fabric.plugins.precision import MixedPrecision

MIXED = ("bf16-mixed", "16-mixed")


class MixedKeepingInputs(MixedPrecision):
    """Fabric's ``bf16-mixed`` / ``16-mixed`` (autocast, and a gradient scaler for float16),
    the inputs untouched."""

    def convert_input(self, data: Any) -> Any:
        return data


def precision_plugin(precision: str | None, device: str | None) -> MixedKeepingInputs | None:
    """The plugin for a mixed ``precision`` on ``device`` (``cuda`` or ``cpu``; None where the
    accelerator is another, which keeps Fabric's own); None for any other precision. On the
    CPU, ``16-mixed`` runs as ``bf16-mixed``, as Fabric runs it (float16 autocast and its
    loss scaler are for GPUs)."""
    if precision not in MIXED or device is None:
        return None
    if device == "cpu":
        return MixedKeepingInputs("bf16-mixed", device)
    return MixedKeepingInputs(precision, device)  # type: ignore[arg-type]  # checked: MIXED
