"""The training loop every recipe shares: our own readable loop, driven by Lightning Fabric.

Fabric gives devices, precision and distributed training (``--devices 2 --strategy ddp``)
without changing this loop. Each epoch ends with a dev evaluation; the best weights so far are
written atomically, so Ctrl-C or a crash leaves them intact and loadable. The first best model
is swapped into the output whole (``bistack.runs.rundir``); before it, the output is untouched. A
loss or gradient norm that is not finite stops training with an error naming the epoch and step.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import torch
from tqdm import tqdm

from bistack.config import OptimizerConfig, TrainConfig
from bistack.data.ahead import overlapped
from bistack.errors import ConfigError
from bistack.metrics.dev import Evaluation
from bistack.models.backbone import compile_backbones
from bistack.models.devices import MatmulPrecision, set_matmul_precision
from bistack.runs.averaging import WeightAverage
from bistack.runs.checkpoint import Checkpoint, LoopState, save_checkpoint
from bistack.runs.rundir import RunDirectory
from bistack.runs.tally import READ_EVERY, StepTally, TrainingDiverged
from bistack.runs.tensorboard import ScalarEvents
from bistack.runs.tensorboard import installed as tensorboard_installed
from bistack.runs.tensorboard import keep_until as keep_events_until
from bistack.system.heartbeat import Heartbeat

if TYPE_CHECKING:
    from lightning_fabric import Fabric


class LoopTask(Protocol):
    """What the loop needs from a recipe."""

    def train_lengths(self) -> Sequence[int]: ...
    def collate(self, indices: list[int]) -> Any: ...
    def evaluate(self) -> Evaluation: ...
    def save_weights(self, directory: Path) -> None: ...


# Called after each epoch's dev evaluation with the epoch and the score the loop maximises;
# returns why training stops now (a tuner pruning a hopeless trial), or None to go on.
EpochHook = Callable[[int, float], str | None]


@dataclass(frozen=True)
class FitResult:
    best_score: float
    best_epoch: int
    epochs: int
    best_step: int = 0  # optimizer steps before the best validation (train.eval_every)


@dataclass(frozen=True)
class Run:
    """A started training run: its Fabric and where it writes (see ``bistack.runs.rundir``)."""

    fabric: Fabric
    directory: RunDirectory
    log_format: Literal["text", "json"] = "text"  # json: one object a line, for machines

    @property
    def output(self) -> Path:
        """The folder that holds the run's files now: staging, until the first best model."""
        return self.directory.root

    @property
    def model_dir(self) -> Path:
        return self.directory.model_dir

    def say(self, message: str) -> None:
        """Print once (rank 0), at once: logs are read while runs go on."""
        if self.log_format == "json":
            message = json.dumps({"event": "message", "text": message.strip()})
        self.fabric.print(message, flush=True)

    def report_epoch(self, row: dict[str, float], line: str, best: bool) -> None:
        """One line per epoch: readable, or the metrics row as a JSON object."""
        if self.log_format == "json":
            self.fabric.print(json.dumps({"event": "epoch", **row, "best": best}), flush=True)
        else:
            self.fabric.print(line, flush=True)


def start_run(
    output: str | Path,
    seed: int,
    *,
    devices: int | str,
    strategy: str,
    num_nodes: int = 1,
    accelerator: str,
    precision: str | None = None,
    matmul_precision: MatmulPrecision = "high",
    overwrite: bool = False,
    resume: bool = False,
    log_format: Literal["text", "json"] = "text",
) -> Run:
    """Launch Fabric (one process per device under DDP), seed every process alike, and (rank
    0) lock the output and start staging, or, to ``resume``, write into it directly."""
    from lightning_fabric import Fabric  # only training needs it: most of a second to import

    from bistack.runs.mixed import precision_plugin

    on_cuda = accelerator in ("cuda", "gpu", "auto") and torch.cuda.is_available()
    if on_cuda:
        set_matmul_precision("cuda", matmul_precision)  # before Fabric, which checks it
    device = "cuda" if on_cuda else "cpu" if accelerator in ("cpu", "auto") else None
    plugin = precision_plugin(precision, device)  # mixed: the batch's floats left as they are
    try:
        fabric = Fabric(
            accelerator=accelerator,
            devices=devices,
            num_nodes=num_nodes,
            strategy=strategy,
            precision=None if plugin else precision,  # type: ignore[arg-type]  # Fabric checks
            plugins=plugin,
        )
        fabric.launch()
    except (ValueError, TypeError, RuntimeError, ImportError) as error:
        # Lightning's word for it; the traceback would only show where it was found out.
        reason = str(error).splitlines()[0]
        chosen = f" --precision {precision}" if precision else ""
        raise ConfigError(
            f"--accelerator {accelerator} --devices {devices} --num-nodes {num_nodes} "
            f"--strategy {strategy}{chosen}: {reason}"
        ) from None
    fabric.seed_everything(seed, verbose=False)
    if fabric.is_global_zero and resume:
        directory = RunDirectory.resume(Path(output))
    elif fabric.is_global_zero:
        directory = RunDirectory.open(Path(output), overwrite)
    else:
        directory = RunDirectory.follower(Path(output))
    run = Run(fabric, directory, log_format)
    for note in directory.notes:
        run.say(note)
    if plugin is not None and plugin.precision != precision:
        run.say(f"--precision {precision} runs as {plugin.precision} on the CPU (Fabric's rule)")
    return run


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
    linear warm-up over ``warmup_fraction`` of all steps then a linear decay to 0 when set."""

    lr_decay: float
    warmup_fraction: float
    total_steps: int

    def factor(self, epoch: int, step: int) -> float:
        """``epoch`` counts from 1, ``step`` (all steps so far) from 0."""
        factor = 1 / (1 + self.lr_decay * (epoch - 1))
        if self.warmup_fraction > 0:
            warmup = max(1, round(self.warmup_fraction * self.total_steps))
            if step < warmup:
                return factor * (step + 1) / warmup
            return factor * max(0.0, (self.total_steps - step) / max(1, self.total_steps - warmup))
        return factor


class MetricsLog:
    """metrics.csv, one row per epoch, plus a TensorBoard event file when TensorBoard is
    installed (``bistack.runs.tensorboard``); both in the run's folder of the moment (staging,
    then the output)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        run.output.mkdir(parents=True, exist_ok=True)
        self.events = ScalarEvents() if tensorboard_installed() else None

    def keep_until(self, epoch: int, step: int) -> None:
        """Drop the rows after ``epoch`` (a resumed run computes them again), and TensorBoard's
        after ``step`` (the epoch's, or its last optimizer step's)."""
        path = self.run.output / "metrics.csv"
        if path.exists():
            lines = path.read_text().splitlines(keepends=True)
            rows = [line for line in lines[1:] if int(line.split(",")[0]) <= epoch]
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_text("".join(lines[:1] + rows))
            temporary.replace(path)
        if self.events is not None:
            keep_events_until(self.run.output, step)

    def write(self, row: dict[str, float], step: int) -> None:
        """Append ``row``; TensorBoard draws it at ``step`` (its epoch, or with
        ``train.eval_every`` its optimizer step)."""
        path = self.run.output / "metrics.csv"
        new = not path.exists()
        with path.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)
        if self.events is not None:
            scalars = {key: value for key, value in row.items() if key not in ("epoch", "step")}
            self.events.write(self.run.output, scalars, step)


def fit(
    run: Run,
    model: torch.nn.Module,
    task: LoopTask,
    train: TrainConfig,
    optimizer_config: OptimizerConfig,
    *,
    progress: bool,
    config: dict[str, Any] | None = None,
    inputs: dict[str, str] | None = None,
    resume: Checkpoint | None = None,
    on_epoch: EpochHook | None = None,
    groups_of: ParameterGroups | None = None,
) -> FitResult:
    """Train ``model`` (unwrapped) on ``task`` until patience, max_epochs or max_minutes, or
    until ``on_epoch(epoch, score)`` (after each dev evaluation) gives a reason to stop.

    Rank 0 alone logs metrics (``run.output/metrics.csv``), saves the best weights, and every
    ``train.checkpoint_every`` epochs a checkpoint (with ``config`` and ``inputs``, the digests
    of the files it reads); ``resume`` goes on from one, as if the run had never stopped.
    ``groups_of``: the model's parameter groups (:func:`build_optimizer`).
    """
    fabric, say = run.fabric, run.say
    log = MetricsLog(run) if fabric.is_global_zero else None
    if train.compile:  # the config refuses it for a model that fine-tunes no transformer
        compile_backbones(model)
        say(
            "train.compile: the fine-tuned transformer is compiled; the first step, the first "
            "at another batch shape and the first dev scoring take longer while it compiles"
        )
    optimizer = optimizer_for(fabric, optimizer_config, model, groups_of)
    wrapped, optimizer = fabric.setup(model, optimizer)
    average = WeightAverage(model, train.weight_average) if train.weight_average else None
    best, best_epoch, stale, epoch, spent, first = float("-inf"), 0, 0, 0, 0.0, 1
    steps_per_epoch = len(my_batches(fabric, task, train, 1))
    by_step = train.eval_every > 0
    updates = math.ceil(steps_per_epoch / train.accumulate_batches)  # optimizer steps an epoch
    if resume is not None:
        resume.restore(model, getattr(optimizer, "optimizer", optimizer), average)
        state = resume.state
        best, best_epoch, stale, epoch, spent = (
            state.best,
            state.best_epoch,
            state.stale,
            state.epoch,
            state.elapsed,
        )
        first = train.max_epochs + 1 if state.stopped else state.epoch + 1
        if log is not None:
            log.keep_until(state.epoch, state.epoch * updates if by_step else state.epoch)
        say(f"resumed after epoch {state.epoch} (best dev {best:.2f} at epoch {best_epoch})")
    started = time.monotonic() - spent
    schedule = Schedule(
        optimizer_config.lr_decay,
        optimizer_config.warmup_fraction,
        steps_per_epoch * train.max_epochs,
    )
    best_step = 0

    def validate(epoch: int, loss: float, update: int, end: bool) -> bool:
        """Score dev after ``update`` optimizer steps of the run, keep the best weights, log
        the row; whether training stops now (patience counts validations)."""
        nonlocal best, best_epoch, best_step, stale
        # dev scores the weights the best model would keep, at the training's precision
        with averaged(average), fabric.autocast():
            evaluation = task.evaluate()
        improved = evaluation.score > best  # a NaN score never improves
        elapsed = time.monotonic() - started
        row = {"epoch": epoch, **({"step": update} if by_step else {}), "train_loss": loss}
        row |= {**evaluation.metrics, "lr": optimizer.param_groups[0]["lr"]}
        row["seconds"] = round(elapsed, 1)
        if log is not None:  # before the save: the first best model takes its metrics along
            log.write(row, update if by_step else epoch)
        if improved:
            best, best_epoch, stale = evaluation.score, epoch, 0
            best_step = update if by_step else 0
            with averaged(average):
                refuse_non_finite_weights(model, epoch, optimizer)
                if fabric.is_global_zero:
                    task.save_weights(run.model_dir)
            if fabric.is_global_zero:
                run.directory.commit()
        else:
            stale += 1
        where = f"epoch {epoch}" + (f" step {update}" if by_step else "")
        run.report_epoch(
            row,
            f"{where}: loss {loss:.4f}  {evaluation.summary}"
            f"{'  (best, saved)' if improved else ''}  [{elapsed:.0f}s]",
            improved,
        )
        out_of_time = train.max_minutes is not None and elapsed > train.max_minutes * 60
        halted = on_epoch(epoch, evaluation.score) if on_epoch is not None and end else None
        stop = bool(fabric.broadcast(stale >= train.patience or out_of_time or halted is not None))
        every = train.checkpoint_every
        if end and fabric.is_global_zero and every and (epoch % every == 0 or stop):
            state = LoopState(epoch, best, best_epoch, stale, elapsed, stopped=stop)
            save_checkpoint(
                run.output, model, optimizer, state, config or {}, inputs or {}, average
            )
        if stop:
            reason = halted or ("time budget reached" if out_of_time else "no dev improvement")
            say(f"stopping after {where}: {reason}")
        return stop

    def validate_within(
        points: set[int],
        epoch: int,
        before: int,
        stopped: list[int],
        update: int,
        loss: Callable[[], float],
    ) -> bool:
        """After ``update`` steps of ``epoch``: validate there if it is one of ``points``
        (``loss`` reads the pass's mean loss so far); whether training stops (noted in
        ``stopped``)."""
        if update in points and validate(epoch, loss(), before + update, end=False):
            stopped.append(update)
        return bool(stopped)

    try:
        for epoch in range(first, train.max_epochs + 1):
            description = f"epoch {epoch}/{train.max_epochs}"
            if best_epoch:
                description += f" (best dev {best:.2f})"
            before = (epoch - 1) * updates  # optimizer steps of the earlier epochs
            points = validation_points(train.eval_every, before, updates)
            stopped: list[int] = []  # the step a validation within the epoch stopped at
            within = functools.partial(validate_within, points, epoch, before, stopped)
            loss = run_epoch(
                fabric,
                wrapped,
                optimizer,
                task,
                my_batches(fabric, task, train, epoch),
                optimizer_config.grad_clip,
                functools.partial(step_factor, schedule, epoch, steps_per_epoch),
                description,
                progress and fabric.is_global_zero,
                epoch,
                average,
                train.accumulate_batches,
                within if points else None,
                run.say if fabric.is_global_zero else None,
            )
            if stopped:
                break
            if validate(epoch, loss, before + updates, end=True):
                break
    except KeyboardInterrupt:
        say(f"\ninterrupted: {kept(run, best, best_epoch)}")
        raise Interrupted from None
    except TrainingDiverged as error:
        raise TrainingDiverged(f"{error}; {kept(run, best, best_epoch)}") from None
    return FitResult(best, best_epoch, epoch, best_step)


def validation_points(every: float, before: int, updates: int) -> set[int]:
    """The optimizer steps of an epoch (counted from 1 within it) after which dev is scored
    besides its end: every ``every`` steps of the run (``before``: the steps of the earlier
    epochs), or, below 1, at each ``every`` share of the epoch; none when ``every`` is 0."""
    if every <= 0:
        return set()
    if every >= 1:
        period = int(every)
        first = period - before % period
        return set(range(first, updates, period))
    period = max(1, round(every * updates))
    return set(range(period, updates, period))


def averaged(average: WeightAverage | None) -> AbstractContextManager:
    """The weight average in the network's place inside the block, when the run keeps one."""
    return average.applied() if average is not None else nullcontext()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C in a run that has already said what it leaves."""


def kept(run: Run, best: float = float("-inf"), best_epoch: int = 0) -> str:
    """What a stopped run leaves, truthfully (``best_epoch`` 0: not known here)."""
    if run.directory.committed:
        detail = f" (dev {best:.2f}, epoch {best_epoch})" if best_epoch else ""
        return f"the best model so far{detail} is intact in {run.model_dir}"
    return f"no model was saved, and {run.directory.output} is as it was"


def my_batches(fabric: Fabric, task: LoopTask, train: TrainConfig, epoch: int) -> list[list[int]]:
    """This process's share of the epoch's length-bucketed batches."""
    from bistack.data.buckets import bucket_batches

    batches = bucket_batches(
        task.train_lengths(),
        train.batch_size,
        shuffle=True,
        seed=train.seed * 1000 + epoch,
        pool=50 if train.length_buckets else 1,
    )
    # Every process takes the same number of batches, so DDP steps stay in lockstep.
    per_rank = len(batches) // fabric.world_size
    return batches[fabric.global_rank :: fabric.world_size][:per_rank]


def step_factor(schedule: Schedule, epoch: int, steps_per_epoch: int, step: int) -> float:
    """The learning-rate factor of ``step`` (counted within ``epoch``) under ``schedule``."""
    return float(schedule.factor(epoch, (epoch - 1) * steps_per_epoch + step))


def run_epoch(
    fabric: Fabric,
    model: Any,  # the model as Fabric wraps it (``fabric.setup``)
    optimizer: torch.optim.Optimizer,
    task: LoopTask,
    batches: list[list[int]],
    grad_clip: float,
    lr_factor: Callable[[int], float],
    description: str,
    show: bool,
    epoch: int = 0,
    average: WeightAverage | None = None,
    accumulate: int = 1,
    after_step: Callable[[int, Callable[[], float]], bool] | None = None,
    say: Callable[[str], None] | None = None,
) -> float:
    """One pass over ``batches``; returns the mean training loss. ``show`` draws a bar; else
    ``say`` (when given) says how far it is every half minute or so (a log's progress).

    The optimizer steps once every ``accumulate`` batches (and after the last), on their
    gradients summed, each batch's loss divided by how many its step takes; under DDP the
    processes exchange gradients once per step. ``lr_factor(step)`` scales each group's base
    rate at the step's first batch (``step`` counts batches). Losses and gradient norms stay on
    the device (:class:`~bistack.runs.tally.StepTally`): one that is not finite raises
    :class:`TrainingDiverged` when they are next read, but for a float16 loss scaler's
    overflow, whose step the scaler skips. ``average``, when given, takes in the weights after
    every step. ``after_step(update, mean_loss)``, when given, is called after each optimizer
    step (counted from 1) with a function that reads the mean loss so far, and ends the pass
    when it returns True.
    """
    model.train()
    scaler = getattr(fabric.strategy.precision, "scaler", None)  # float16's loss scaler, if any

    def diverged_at(what: str, value: float, batch: int) -> TrainingDiverged:
        return diverged(what, value, epoch, batch, optimizer)

    tally = StepTally(fabric.device, scaler is not None, diverged_at)
    bar = tqdm(batches, desc=description, disable=not show, leave=False, dynamic_ncols=True)
    beat = Heartbeat(description, len(batches), "batches", say) if say and not show else None
    # The next batches collated and copied to the device while this step runs.
    moved = (task.collate(indices).to(fabric.device) for indices in batches)
    collated = overlapped(moved, fabric.device, depth=2)
    try:
        for step, (_, batch) in enumerate(zip(bar, collated, strict=True)):
            first = step - step % accumulate  # the step's first batch
            taken = min(accumulate, len(batches) - first)  # batches in this step
            if step == first:
                for group in optimizer.param_groups:
                    group["lr"] = group["base_lr"] * lr_factor(step)
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
            if grad_clip > 0:
                # Clipping by norm returns the norm, kept to be checked with the losses (a
                # non-finite one then names the step, rather than ending in clipping's own error).
                clipped = fabric.clip_gradients(
                    model, optimizer, max_norm=grad_clip, error_if_nonfinite=False
                )
                tally.add_norm(cast(torch.Tensor, clipped))
            optimizer.step()
            if average is not None:
                average.update()
            if after_step is not None:
                if after_step(step // accumulate + 1, tally.read):
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
