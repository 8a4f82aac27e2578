"""One pass of training over an epoch's batches (:func:`run_epoch`, as an :class:`EpochPlan`
says) of what a recipe gives the loop (:class:`LoopTask`), and the errors that name where
training diverged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from tqdm import tqdm

from bistack.devices.ahead import overlapped
from bistack.metrics.dev import Evaluation
from bistack.runs.averaging import WeightAverage
from bistack.runs.tally import READ_EVERY, StepTally, TrainingDiverged
from bistack.system.heartbeat import Heartbeat

if TYPE_CHECKING:
    from lightning_fabric import Fabric


class LoopTask(Protocol):
    """What the loop needs from a recipe."""

    def train_lengths(self) -> Sequence[int]: ...
    def collate(self, indices: list[int]) -> Any: ...
    def evaluate(self) -> Evaluation: ...
    def save_weights(self, directory: Path) -> None: ...


@dataclass(frozen=True)
class EpochPlan:
    """How one pass trains: ``grad_clip`` (0: none); ``lr_factor(step)`` scales each group's
    base rate at the step's first batch (``step`` counts batches); ``description`` names the
    pass (its bar, its log lines); ``show`` draws a bar, else ``say`` (when given) says how far
    it is every half minute or so; ``epoch`` (for messages); ``average``, when given, takes in
    the weights after every step; the optimizer steps once every ``accumulate`` batches;
    ``after_step(update, mean_loss)``, when given, is called after each optimizer step (counted
    from 1) with a function that reads the mean loss so far, and ends the pass when it returns
    True."""

    grad_clip: float = 0.0
    lr_factor: Callable[[int], float] = lambda _: 1.0
    description: str = ""
    show: bool = False
    epoch: int = 0
    average: WeightAverage | None = None
    accumulate: int = 1
    after_step: Callable[[int, Callable[[], float]], bool] | None = None
    say: Callable[[str], None] | None = None


def run_epoch(
    fabric: Fabric,
    model: Any,  # the model as Fabric wraps it (``fabric.setup``)
    optimizer: torch.optim.Optimizer,
    task: LoopTask,
    batches: list[list[int]],
    plan: EpochPlan,
) -> float:
    """One pass over ``batches`` as ``plan`` says; returns the mean training loss.

    The optimizer steps once every ``plan.accumulate`` batches (and after the last), on their
    gradients summed, each batch's loss divided by how many its step takes; under DDP the
    processes exchange gradients once per step. Losses and gradient norms stay on the device
    (:class:`~bistack.runs.tally.StepTally`): one that is not finite raises
    :class:`TrainingDiverged` when they are next read, but for a float16 loss scaler's
    overflow, whose step the scaler skips.
    """
    epoch, accumulate, average, show = plan.epoch, plan.accumulate, plan.average, plan.show
    model.train()
    scaler = getattr(fabric.strategy.precision, "scaler", None)  # float16's loss scaler, if any

    def diverged_at(what: str, value: float, batch: int) -> TrainingDiverged:
        return diverged(what, value, epoch, batch, optimizer)

    tally = StepTally(fabric.device, scaler is not None, diverged_at)
    bar = tqdm(batches, desc=plan.description, disable=not show, leave=False, dynamic_ncols=True)
    beat = (
        Heartbeat(plan.description, len(batches), "batches", plan.say)
        if plan.say and not show
        else None
    )
    # The next batches collated and copied to the device while this step runs.
    moved = (task.collate(indices).to(fabric.device) for indices in batches)
    collated = overlapped(moved, fabric.device, depth=2)
    try:
        for step, (_, batch) in enumerate(zip(bar, collated, strict=True)):
            first = step - step % accumulate  # the step's first batch
            taken = min(accumulate, len(batches) - first)  # batches in this step
            if step == first:
                for group in optimizer.param_groups:
                    group["lr"] = group["base_lr"] * plan.lr_factor(step)
                optimizer.zero_grad(set_to_none=True)
            last = step == first + taken - 1
            with fabric.no_backward_sync(model, enabled=not last):
                loss = model(batch)  # (), the mean loss per real token or example
                tally.add_loss(loss)
                fabric.backward(loss / taken if taken > 1 else loss)
            if beat is not None:
                beat.update()
            if show and (step + 1) % READ_EVERY == 0:
                bar.set_postfix(loss=f"{tally.read():.4f}")
            if not last:
                continue
            if plan.grad_clip > 0:
                # Clipping by norm returns the norm, kept to be checked with the losses (a
                # non-finite one then names the step, rather than ending in clipping's own error).
                clipped = fabric.clip_gradients(
                    model, optimizer, max_norm=plan.grad_clip, error_if_nonfinite=False
                )
                tally.add_norm(cast(torch.Tensor, clipped))
            optimizer.step()
            if average is not None:
                average.update()
            if plan.after_step is not None:
                if plan.after_step(step // accumulate + 1, tally.read):
                    break
                model.train()  # a validation scored dev in eval mode
    finally:
        collated.close()
    return tally.read()


def refuse_non_finite_weights(
    model: torch.nn.Module, epoch: int, optimizer: torch.optim.Optimizer
) -> None:
    """TrainingDiverged naming the first weight (or buffer) with a NaN or infinity, before a
    model that could never predict is saved: a finite loss does not prove finite weights (a
    weight average, or a step after the last loss, can still break them)."""
    floats = {n: t for n, t in model.state_dict().items() if t.is_floating_point()}
    if not floats:
        return
    finite = torch.stack([torch.isfinite(t).all() for t in floats.values()])
    if bool(finite.all()):  # one wait for the device, not one per tensor
        return
    name = list(floats)[int((~finite).nonzero()[0])]
    rate = optimizer.param_groups[0]["lr"]
    raise TrainingDiverged(
        f"training diverged by epoch {epoch}: the weights {name} are not finite, so they are "
        f"not saved; lower optimizer.lr (now {rate:.3g}) or train.weight_average, and keep "
        "optimizer.grad_clip on"
    )


def diverged(
    what: str, value: float, epoch: int, step: int, optimizer: torch.optim.Optimizer
) -> TrainingDiverged:
    rate = optimizer.param_groups[0]["lr"]
    return TrainingDiverged(
        f"training diverged at epoch {epoch}, step {step}: the {what} is {value}; lower "
        f"optimizer.lr (now {rate:.3g}), keep optimizer.grad_clip on, and check the targets "
        "for extreme values"
    )
