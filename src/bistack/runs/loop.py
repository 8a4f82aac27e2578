"""The training loop every recipe shares: our own readable loop, driven by Lightning Fabric.

Fabric gives devices, precision and distributed training (``--devices 2 --strategy ddp``)
without changing this loop. Each epoch ends with a dev evaluation; the best weights so far are
written atomically, so Ctrl-C or a crash leaves them intact and loadable. The first best model
is swapped into the output whole (``bistack.runs.rundir``); before it, the output is untouched. A
loss or gradient norm that is not finite stops training with an error naming the epoch and step.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from bistack.config import OptimizerConfig, TrainConfig
from bistack.devices.choice import MatmulPrecision, set_matmul_precision
from bistack.errors import ConfigError
from bistack.models.backbone_training import compile_backbones, compiled_graphs, eager_fallbacks
from bistack.runs.averaging import WeightAverage
from bistack.runs.checkpoint import Checkpoint, LoopState, save_checkpoint
from bistack.runs.epoch import EpochPlan, LoopTask, refuse_non_finite_weights, run_epoch
from bistack.runs.metrics_log import MetricsLog
from bistack.runs.optimizers import ParameterGroups, Schedule, optimizer_for, step_factor
from bistack.runs.rundir import LOG, METRICS, RunDirectory
from bistack.runs.tally import TrainingDiverged
from bistack.runs.tensorboard import installed as tensorboard_installed

if TYPE_CHECKING:
    from lightning_fabric import Fabric


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
    label: str = ""  # whose lines these are, where runs print side by side

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
            named = {"run": self.label} if self.label else {}
            message = json.dumps({"event": "message", **named, "text": message.strip()})
        elif self.label:  # after the blank lines a message may start with
            text = message.lstrip("\n")
            message = message[: len(message) - len(text)] + f"{self.label}: {text}"
        self.fabric.print(message, flush=True)
        self.directory.log(message)

    def report_epoch(self, row: dict[str, float], line: str, best: bool) -> None:
        """One line per epoch: readable, or the metrics row as a JSON object."""
        if self.log_format == "json":
            named = {"run": self.label} if self.label else {}
            printed = json.dumps({"event": "epoch", **named, **row, "best": best})
        else:
            printed = f"{self.label}: {line}" if self.label else line
        self.fabric.print(printed, flush=True)
        self.directory.log(printed)


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
    label: str = "",
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
    run = Run(fabric, directory, log_format, label)
    run.say(curves_line(directory.output))
    for note in directory.notes:
        run.say(note)
    if plugin is not None and plugin.precision != precision:
        run.say(f"--precision {precision} runs as {plugin.precision} on the CPU (Fabric's rule)")
    return run


def curves_line(output: Path) -> str:
    """The run's first line: where its log and curves go, and whether TensorBoard's are written
    (with TensorBoard installed: ``bistack[tensorboard]``)."""
    if tensorboard_installed():
        curves = f"TensorBoard curves in {output}/tensorboard"
    else:
        curves = "no TensorBoard curves (pip install 'bistack[tensorboard]' writes them)"
    return f"log in {output}/{LOG}; metrics in {output}/{METRICS}; {curves}"


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
    # Dynamo's recompile limit (8 graphs) raised for this run to the graphs its widths take,
    # put back after it: past the limit, batches would run uncompiled.
    graphs = contextlib.nullcontext()
    if train.compile:  # the config refuses it for a model that fine-tunes no transformer
        needed = compile_backbones(model)
        limit = max(torch._dynamo.config.recompile_limit, needed)
        graphs = torch._dynamo.config.patch(recompile_limit=limit)
        say(
            "train.compile: the fine-tuned transformer is compiled, its batches padded to "
            "16, 32, 64... subwords; the first step at each width takes longer while it "
            "compiles (the graphs so far: compiled_graphs in metrics.csv)"
        )
    optimizer = optimizer_for(fabric, optimizer_config, model, groups_of)
    wrapped, optimizer = fabric.setup(model, optimizer)
    average = WeightAverage(model, train.weight_average) if train.weight_average else None
    steps_per_epoch = len(my_batches(fabric, task, train, 1))
    updates = math.ceil(steps_per_epoch / train.accumulate_batches)  # optimizer steps an epoch
    keep = Validation(run, model, task, optimizer, train, log, average, on_epoch)
    keep.saved_with = (config or {}, inputs or {})  # what a checkpoint records
    first = keep.resumed(resume, updates) if resume is not None else 1
    epoch = resume.state.epoch if resume is not None else 0  # the last epoch trained
    schedule = Schedule(
        optimizer_config.lr_decay,
        optimizer_config.warmup_fraction,
        steps_per_epoch * train.max_epochs,
        optimizer_config.schedule,
    )
    with graphs:
        try:
            for epoch in range(first, train.max_epochs + 1):
                description = f"epoch {epoch}/{train.max_epochs}"
                if keep.best_epoch:
                    description += f" (best dev {keep.best:.2f})"
                before = (epoch - 1) * updates  # optimizer steps of the earlier epochs
                points = validation_points(train.eval_every, before, updates)
                plan = EpochPlan(
                    optimizer_config.grad_clip,
                    functools.partial(step_factor, schedule, epoch, steps_per_epoch),
                    description,
                    progress and fabric.is_global_zero,
                    epoch,
                    average,
                    train.accumulate_batches,
                    keep.within(epoch, before, points) if points else None,
                    run.say if fabric.is_global_zero else None,
                )
                loss = run_epoch(
                    fabric, wrapped, optimizer, task, my_batches(fabric, task, train, epoch), plan
                )
                if keep.stopped_within:
                    break
                if keep(epoch, loss, before + updates, end=True):
                    break
        except KeyboardInterrupt:
            say(f"\ninterrupted: {kept(run, keep.best, keep.best_epoch)}")
            raise Interrupted from None
        except TrainingDiverged as error:
            raise TrainingDiverged(f"{error}; {kept(run, keep.best, keep.best_epoch)}") from None
    return FitResult(keep.best, keep.best_epoch, epoch, keep.best_step)


class Validation:
    """``fit``'s dev validations and what they keep between them: the best score, its epoch
    and step, how many validations since it (patience counts them), when the run started. A
    call scores dev after an optimizer step, keeps the best weights, logs the row and says
    whether training stops."""

    def __init__(
        self,
        run: Run,
        model: torch.nn.Module,
        task: LoopTask,
        optimizer: torch.optim.Optimizer,
        train: TrainConfig,
        log: MetricsLog | None,
        average: WeightAverage | None,
        on_epoch: EpochHook | None,
    ) -> None:
        self.run, self.model, self.task, self.optimizer = run, model, task, optimizer
        self.train, self.log, self.average, self.on_epoch = train, log, average, on_epoch
        self.by_step = train.eval_every > 0
        self.best, self.best_epoch, self.best_step, self.stale = float("-inf"), 0, 0, 0
        self.started = time.monotonic()
        self.graphs_before = compiled_graphs() if train.compile else 0  # earlier runs'
        self.fallbacks_before = eager_fallbacks() if train.compile else 0
        self.said_fallback = False
        self.saved_with: tuple[dict[str, Any], dict[str, str]] = ({}, {})  # checkpoint's
        self.stopped_within = False  # a validation inside the last epoch stopped training

    def resumed(self, resume: Checkpoint, updates: int) -> int:
        """Go on from ``resume`` (weights, optimizer, average and this state restored); the
        first epoch to train."""
        resume.restore(
            self.model, getattr(self.optimizer, "optimizer", self.optimizer), self.average
        )
        state = resume.state
        self.best, self.best_epoch, self.stale = state.best, state.best_epoch, state.stale
        self.started = time.monotonic() - state.elapsed
        if self.log is not None:
            self.log.keep_until(state.epoch, state.epoch * updates if self.by_step else state.epoch)
        self.run.say(
            f"resumed after epoch {state.epoch} (best dev {self.best:.2f} at epoch "
            f"{self.best_epoch})"
        )
        return self.train.max_epochs + 1 if state.stopped else state.epoch + 1

    def within(
        self, epoch: int, before: int, points: set[int]
    ) -> Callable[[int, Callable[[], float]], bool]:
        """What ``run_epoch`` calls after each optimizer step of ``epoch`` (``before``: the
        steps of the earlier epochs): a validation there when the step is one of ``points``
        (``loss`` reads the pass's mean loss so far); whether training stops."""

        def after_step(update: int, loss: Callable[[], float]) -> bool:
            if update in points and self(epoch, loss(), before + update, end=False):
                self.stopped_within = True
            return self.stopped_within

        return after_step

    def __call__(self, epoch: int, loss: float, update: int, end: bool) -> bool:
        """Score dev after ``update`` optimizer steps of the run (``end``: of ``epoch``),
        keep the best weights, log the row; whether training stops now."""
        run, train, fabric = self.run, self.train, self.run.fabric
        # dev scores the weights the best model would keep, at the training's precision
        with averaged(self.average), fabric.autocast():
            evaluation = self.task.evaluate()
        improved = evaluation.score > self.best  # a NaN score never improves
        elapsed = time.monotonic() - self.started
        row = {"epoch": epoch, **({"step": update} if self.by_step else {}), "train_loss": loss}
        row |= {**evaluation.metrics, "lr": self.optimizer.param_groups[0]["lr"]}
        row["seconds"] = round(elapsed, 1)
        if train.compile:
            row["compiled_graphs"] = compiled_graphs() - self.graphs_before
            fallbacks = eager_fallbacks() - self.fallbacks_before
            if fallbacks and not self.said_fallback:
                self.said_fallback = True
                run.say(
                    "some batches ran uncompiled: their shapes passed dynamo's recompile limit "
                    f"({torch._dynamo.config.recompile_limit} graphs); lower train.batch_size's "
                    "spread of lengths, or backbone.max_length"
                )
        if self.log is not None:  # before the save: the first best model takes its metrics
            self.log.write(row, update if self.by_step else epoch)
        if improved:
            gained, stale = evaluation.score - self.best, self.stale  # inf: the first one
            self.kept_best(evaluation.score, epoch, update)
            if gained <= train.min_delta:  # kept, but too small a gain to reset patience
                self.stale = stale + 1
        else:
            self.stale += 1
        where = f"epoch {epoch}" + (f" step {update}" if self.by_step else "")
        run.report_epoch(
            row,
            f"{where}: loss {loss:.4f}  {evaluation.summary}"
            f"{'  (best, saved)' if improved else ''}  [{elapsed:.0f}s"
            + (f", {row['compiled_graphs']} graphs compiled]" if train.compile else "]"),
            improved,
        )
        out_of_time = train.max_minutes is not None and elapsed > train.max_minutes * 60
        halted = self.on_epoch(epoch, evaluation.score) if self.on_epoch and end else None
        stop = self.stale >= train.patience or out_of_time or halted is not None
        stop = bool(fabric.broadcast(stop))
        every = train.checkpoint_every
        if end and fabric.is_global_zero and every and (epoch % every == 0 or stop):
            state = LoopState(epoch, self.best, self.best_epoch, self.stale, elapsed, stopped=stop)
            config, inputs = self.saved_with
            save_checkpoint(
                run.output, self.model, self.optimizer, state, config, inputs, self.average
            )
        if stop:
            reason = halted or ("time budget reached" if out_of_time else "no dev improvement")
            run.say(f"stopping after {where}: {reason}")
        return stop

    def kept_best(self, score: float, epoch: int, update: int) -> None:
        """A new best: its weights saved (the weight average's, where kept), the run
        committed."""
        self.best, self.best_epoch, self.stale = score, epoch, 0
        self.best_step = update if self.by_step else 0
        fabric = self.run.fabric
        with averaged(self.average):
            refuse_non_finite_weights(self.model, epoch, self.optimizer)
            if fabric.is_global_zero:
                self.task.save_weights(self.run.model_dir)
        if fabric.is_global_zero:
            self.run.directory.commit()


def validation_points(every: float, before: int, updates: int) -> set[int]:
    """The optimizer steps of an epoch (counted from 1 within it) after which dev is scored
    besides its end: every ``every`` steps of the run (``before``: the steps of the earlier
    epochs), or, below 1, at each ``every`` share of the epoch, each share's step rounded (so
    that 0.25 of 2,105 steps validates at 526, 1,052 and 1,579, then at the end, not at 2,104
    and again a step later); none when ``every`` is 0."""
    if every <= 0:
        return set()
    if every >= 1:
        period = int(every)
        first = period - before % period
        return set(range(first, updates, period))
    shares = math.ceil(1 / every - 1e-9)  # the epoch's end is the last share's
    steps = {round(k * every * updates) for k in range(1, shares)}
    return {step for step in steps if 0 < step < updates}


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
