"""How a frozen backbone's pass runs, decided once from its config and handed to the pass.

A frozen backbone's vectors are computed at ``backbone.precision``: float32, or its matrix
products in bfloat16 under ``torch.autocast``. One value says so and builds everything that
depends on it: the autocast context the pass runs its encoder under, the feature cache key's
part (vectors of another precision are other vectors) and an ensemble's shared-stage key (two
members share a pass only at one precision). The backbone holds no mode: each pass is given
its :class:`FrozenPass` (as nanoGPT builds its autocast context once, from the config).
"""

from __future__ import annotations

from collections.abc import Hashable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

from bistack.models.precision import autocast_for

if TYPE_CHECKING:
    from bistack.config import BackboneConfig


@dataclass(frozen=True)
class FrozenPass:
    """A frozen pass at ``precision``: "32" (the weights' own) or "bf16-mixed"."""

    precision: Literal["32", "bf16-mixed"] = "32"

    @classmethod
    def of(cls, options: BackboneConfig) -> FrozenPass:
        """The pass ``options`` (a config's ``backbone``) asks for, its precision settled."""
        return cls(options.pass_precision)

    def autocast(self, device: torch.device) -> AbstractContextManager[object]:
        """The context the encoder runs under on ``device`` (none at float32)."""
        context: AbstractContextManager[object] = autocast_for(device.type, self.precision)
        return context

    def states(self, states: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """The encoder's ``states`` as the pass gives them on: float32, whatever autocast
        computed them in."""
        return states if self.precision == "32" else tuple(state.float() for state in states)

    def cache_settings(self, settings: dict[str, object]) -> dict[str, object]:
        """A cache key's ``settings`` with this pass's precision (float32's entries keep the
        keys they had before the setting existed)."""
        return settings if self.precision == "32" else settings | {"precision": self.precision}

    def stage_key(self, backbone: object, *settings: Hashable) -> tuple[Hashable, ...]:
        """The key of a shared stage: members over ``backbone`` reading texts with these
        ``settings`` in this pass give the same vectors, so one pass serves them all."""
        return (id(backbone), *settings, self.precision)


FLOAT32 = FrozenPass()  # a fine-tuned backbone's pass, and any trained in float32
