"""The optimizer a run trains with (its parameter groups, fused where it may be) and its
learning-rate schedule."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from bistack.config import OptimizerConfig

if TYPE_CHECKING:
    from lightning_fabric import Fabric


ParameterGroups = Callable[[float], list[dict[str, Any]]]  # base lr -> torch's param groups


def build_optimizer(
    options: OptimizerConfig,
    model: torch.nn.Module,
    *,
    fused: bool = True,
    groups_of: ParameterGroups | None = None,
) -> torch.optim.Optimizer:
    """The optimizer the config names. ``groups_of(lr)``: the model's parameters in groups of
    their own learning rates (a fine-tuned backbone under a head, its kind's recipe says);
    without it, one group. Each group keeps its base rate in ``base_lr`` for the schedule.
    ``fused`` False: Adam's per-parameter loop, which a loss scaler (float16 mixed precision)
    can unscale before clipping."""
    groups: list[dict[str, Any]] = (
        groups_of(options.lr) if groups_of else [{"params": list(model.parameters())}]
    )
    for group in groups:
        group.setdefault("lr", options.lr)
        group["base_lr"] = group["lr"]
    if options.name == "sgd":
        return torch.optim.SGD(groups, momentum=options.momentum, weight_decay=options.weight_decay)
    optimizer_class = torch.optim.Adam if options.name == "adam" else torch.optim.AdamW
    # fused: one kernel per step instead of a dozen passes over every parameter, 6x faster
    # on CPU for the dense update of a word-embedding table (benchmarks/results/speed.md).
    # Where a loss scaler must unscale first, foreach (each op over all parameters at once),
    # never the per-parameter loop torch otherwise falls back to (about 5x the operators).
    if fused:
        return optimizer_class(groups, weight_decay=options.weight_decay, fused=True)
    return optimizer_class(groups, weight_decay=options.weight_decay, foreach=True)


def optimizer_for(
    fabric: Fabric,
    options: OptimizerConfig,
    model: torch.nn.Module,
    groups_of: ParameterGroups | None = None,
) -> torch.optim.Optimizer:
    """The optimizer ``fit`` trains with: fused, unless a loss scaler (float16 mixed precision
    on a GPU) must unscale the gradients before they are clipped, which a fused optimizer,
    unscaling inside its own step, does not allow."""
    scaled = getattr(fabric.strategy.precision, "scaler", None) is not None
    return build_optimizer(options, model, fused=not scaled, groups_of=groups_of)


@dataclass(frozen=True)
class Schedule:
    """Learning-rate factor per step: ``1 / (1 + lr_decay * epoch)`` (Ma & Hovy 2016), times a
    linear warm-up over ``warmup_fraction`` of all steps, then, after it, a linear decay to 0
    (where a warm-up is set) or, with ``shape`` "cosine", half a cosine to 0 (warm-up or not)."""

    lr_decay: float
    warmup_fraction: float
    total_steps: int
    shape: str = "linear"

    def factor(self, epoch: int, step: int) -> float:
        """``epoch`` counts from 1, ``step`` (all steps so far) from 0."""
        factor = 1 / (1 + self.lr_decay * (epoch - 1))
        if self.warmup_fraction <= 0 and self.shape != "cosine":
            return factor
        warmup = round(self.warmup_fraction * self.total_steps)
        warmup = max(1, warmup) if self.warmup_fraction > 0 else 0
        if step < warmup:
            return factor * (step + 1) / warmup
        done = (step - warmup) / max(1, self.total_steps - warmup)  # of the decay, 0 to 1
        if self.shape == "cosine":
            return factor * 0.5 * (1 + math.cos(math.pi * min(1.0, done)))
        return factor * max(0.0, (self.total_steps - step) / max(1, self.total_steps - warmup))


def step_factor(schedule: Schedule, epoch: int, steps_per_epoch: int, step: int) -> float:
    """The learning-rate factor of ``step`` (counted within ``epoch``) under ``schedule``."""
    return float(schedule.factor(epoch, (epoch - 1) * steps_per_epoch + step))
