"""The one training driver: every model kind trains through :func:`train_model`.

A kind supplies ``prepare(config, run, **inputs) -> Prepared``: read its data, build its model and
what the loop needs. The driver does what every kind shares: start the run, say what is trained,
write the model's metadata (rank 0), run the loop, report the best epoch, and let the kind finish
(calibration, dev metrics) once the best weights are on disk.

It also owns the output directory (``bistack.runs.rundir``): everything is staged beside it and the
model is swapped in whole with the first best weights, so a run that fails before that (a data
check, divergence, Ctrl-C, a kill) leaves an existing model byte for byte as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import torch
from torch import nn

from bistack.config import ExperimentConfig
from bistack.config.files import build_config
from bistack.data.tokenize import anchored, splitter
from bistack.devices.choice import MatmulPrecision
from bistack.errors import BistackError, ConfigError
from bistack.files.claim import output_folder
from bistack.files.fingerprints import changed as changed_content
from bistack.files.fingerprints import digests
from bistack.files.paths import refuse_overlap
from bistack.metrics.dev import Metric
from bistack.runs.checkpoint import (
    CHECKPOINT,
    Checkpoint,
    CheckpointError,
    differences,
    load_checkpoint,
)
from bistack.runs.loop import (
    EpochHook,
    FitResult,
    Interrupted,
    LoopTask,
    Run,
    fit,
    kept,
    start_run,
)
from bistack.runs.model_card import Trained, best_metrics, write_card
from bistack.runs.optimizers import ParameterGroups
from bistack.runs.rundir import check_output


class Saved(Protocol):
    """What the driver writes into the run's model directory, and says of it in its card."""

    def save_metadata(self, path: str | Path) -> None: ...
    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RunOptions:
    """How a run uses the machine (Lightning Fabric's devices, strategy, accelerator), and
    whether it may replace a model already in its output (once it has a better one to put
    there: never before its first best model)."""

    devices: int | str = 1
    num_nodes: int = 1  # machines, each running ``devices`` processes (see the README)
    strategy: str = "auto"
    accelerator: str = "auto"  # a GPU when there is one, else the CPU
    precision: str | None = None  # Fabric's, e.g. bf16-mixed; None: 32-bit
    matmul_precision: MatmulPrecision = "high"  # float32 products on CUDA: TF32 (see devices)
    progress: bool = True
    overwrite: bool = False
    resume: bool = False  # go on from the output's checkpoint (``bistack.runs.checkpoint``)
    # False: no checkpoints whatever train.checkpoint_every says, for the runs of a study (the
    # ladder, compare-poolers, tune), which reruns a run that did not finish rather than
    # resuming it; 1,408 checkpoints were a sixth of a 50-run comparison's time.
    checkpoints: bool = True
    log_format: Literal["text", "json"] = "text"
    # Whose lines these are, where runs print side by side (a CV's folds in worker processes):
    # each line starts "fold1: ", or a JSON line names it as "run".
    label: str = ""

    def __post_init__(self) -> None:
        if self.resume and self.overwrite:  # the command line and bistack.train alike
            raise ConfigError(
                "resume (--resume) goes on with the run in the output; overwrite (--overwrite) "
                "replaces it: give one of them"
            )


DEFAULT_OPTIONS = RunOptions()


@dataclass
class Prepared:
    """What a kind hands the driver.

    model: the wrapper whose metadata goes to the model directory before training;
    network: the module the loop trains (its parameters are counted);
    loop: batches, dev evaluation and weight saving for the loop;
    summary: one line on the data and the model;
    finish: called on rank 0 after training, once the best weights are saved;
    notes: lines the model card adds about the model (what it does beyond its dev scores);
    parameter_groups: the network's parameters in groups of their own learning rates, given
    the base rate (a fine-tuned backbone's layers); None: one group.
    """

    model: Saved
    network: nn.Module
    loop: LoopTask
    summary: str
    finish: Callable[[Run], None] | None = None
    notes: tuple[str, ...] = ()
    parameter_groups: ParameterGroups | None = None


@dataclass(frozen=True)
class TrainedModel:
    model_dir: Path
    fit: FitResult
    parameters: int  # trained parameters (a frozen backbone's not counted)


Prepare = Callable[..., Prepared]


def recorded_config(recorded: dict[str, Any], config: ExperimentConfig) -> dict[str, Any]:
    """A checkpoint's config as this version reads it: a key added since it was written has its
    default, so a run checkpointed before an upgrade resumes after it. One this version cannot
    read is compared as written (what differs is then named key by key)."""
    try:
        return build_config(type(config), recorded, "checkpoint").to_dict()
    except ConfigError:
        return recorded


def data_digests(config: ExperimentConfig, read: dict[str, str]) -> dict[str, str]:
    """Digests of the data files the run read (from ``read``, the checkpoint's, where it
    has them); tables handed over from Python have none."""
    files = [(k, p) for k, p in config.input_paths() if k.startswith("data.")]
    files = [(k, p) for k, p in files if not str(p).startswith("memory:")]
    return {k: read.get(k) or digests([(k, p)])[k] for k, p in files}


def tokenizer_ready(config: ExperimentConfig) -> ExperimentConfig:
    """``config`` with its raw-text tokenizer (every family's ``data.tokenizer``, kept with the
    model) found from anywhere: an ``hf:FOLDER`` given relative to the working directory made
    absolute, on a copy (the caller's config stays as it was). A tokenizer that is not here (a
    spaCy pipeline not installed, a folder that is no tokenizer) stops the run now, before it
    trains, rather than at the model's first prediction, blaming the text."""
    tokenizer = anchored(config.data.tokenizer, Path.cwd())
    splitter(tokenizer)
    if tokenizer == config.data.tokenizer:
        return config
    return dataclasses.replace(config, data=dataclasses.replace(config.data, tokenizer=tokenizer))


def train_model(
    config: ExperimentConfig,
    output: str | Path,
    prepare: Prepare,
    metric: Metric,
    options: RunOptions = DEFAULT_OPTIONS,
    description: str = "a model",
    on_epoch: EpochHook | None = None,
    **inputs: Any,
) -> TrainedModel:
    """Train as ``config`` says; the best model goes to ``output/model``.

    ``inputs`` go to ``prepare`` (e.g. a loaded backbone shared by many runs); ``on_epoch``
    sees each epoch's dev score and may stop the run (``bistack.runs.loop.fit``).
    """
    output = output_folder(output, "--output")  # a link to a folder: written in its target
    refuse_overlap(output, config.input_paths(), "the run's output")
    config = tokenizer_ready(config)
    loop_settings = config.train
    if not options.checkpoints:  # the model's config stays as given
        loop_settings = dataclasses.replace(loop_settings, checkpoint_every=0)
    read = digests(config.input_paths()) if loop_settings.checkpoint_every else {}
    checkpoint = None
    if options.resume:  # before any work, in every process alike
        checkpoint = resumable(Path(output), config, read)
    else:
        check_output(Path(output), options.overwrite)
    run = start_run(
        output,
        config.train.seed,
        devices=options.devices,
        num_nodes=options.num_nodes,
        strategy=options.strategy,
        accelerator=options.accelerator,
        precision=options.precision,
        matmul_precision=options.matmul_precision,
        overwrite=options.overwrite,
        resume=options.resume,
        log_format=options.log_format,
        label=options.label,
    )
    try:
        prepared = prepare(config, run, **inputs)
        parameters = sum(p.numel() for p in prepared.network.parameters() if p.requires_grad)
        run.say(
            f"{prepared.summary}; {parameters:,} trained parameters; optimizer "
            f"{config.optimizer.described()}"
        )
        if run.fabric.is_global_zero:
            prepared.model.save_metadata(run.model_dir)
        result = fit(
            run,
            prepared.network,
            prepared.loop,
            loop_settings,
            config.optimizer,
            progress=options.progress,
            config=config.to_dict(),
            inputs=read,
            resume=checkpoint,
            on_epoch=on_epoch,
            groups_of=prepared.parameter_groups,
        )
        if result.best_epoch == 0:
            raise BistackError(
                f"no epoch gave a finite {metric.name}; {kept(run, result.best_score, 0)}"
            )
        step = f" step {result.best_step}" if result.best_step else ""
        run.say(
            f"best {metric.name} {metric.value(result.best_score):.4g} at epoch "
            f"{result.best_epoch}{step}; model in {run.model_dir}"
        )
        if run.fabric.is_global_zero and prepared.finish is not None:
            prepared.finish(run)
        if run.fabric.is_global_zero:
            card_of_run(run, config, prepared, description, parameters, result, read)
        if run.fabric.is_global_zero:  # finished: nothing left to resume
            (run.output / CHECKPOINT).unlink(missing_ok=True)
        leave_together(run.fabric)
        return TrainedModel(run.model_dir, result, parameters)
    except Interrupted:
        raise
    except KeyboardInterrupt:  # before the first epoch, or while finishing: say it all the same
        run.say(f"\ninterrupted: {kept(run)}")
        raise
    finally:
        run.directory.close()


def resumable(output: Path, config: ExperimentConfig, read: dict[str, str]) -> Checkpoint:
    """The checkpoint in ``output``, checked to be of this config and these files' content
    (``read``: their digests now): a CheckpointError naming what changed otherwise."""
    checkpoint = load_checkpoint(output)
    changed = differences(recorded_config(checkpoint.config, config), config.to_dict())
    if changed:
        raise CheckpointError(
            f"{output}: the checkpoint was trained with another config; --resume needs the "
            f"same one (changed: {', '.join(changed)})"
        )
    edited = changed_content(checkpoint.inputs, read)
    if edited:
        paths = dict(config.input_paths())
        named = ", ".join(f"{key} {paths[key]}" for key in edited)
        raise CheckpointError(
            f"{output}: {named} changed since the checkpoint was written (its content "
            "differs); --resume needs the data it started with: restore it, or start again "
            "with --overwrite"
        )
    return checkpoint


def card_of_run(
    run: Run,
    config: ExperimentConfig,
    prepared: Prepared,
    description: str,
    parameters: int,
    result: FitResult,
    read: dict[str, str],
) -> None:
    """The model card of a finished run (``README.md`` in its model directory)."""
    metrics, seconds = best_metrics(run.output / "metrics.csv", result.best_epoch, result.best_step)
    trained = Trained(
        config.kind,
        description,
        prepared.model.describe(),
        config.to_dict(),
        config.SUMMARY_KEYS,
        prepared.summary,
        prepared.notes,
        parameters,
        result.epochs,
        result.best_epoch,
        metrics,
        seconds,
        data_digests(config, read),
        result.best_step,
    )
    write_card(run.model_dir, trained, torch.__version__)


def leave_together(fabric: Any) -> None:
    """Under DDP, every process waits for the others to finish (rank 0 calibrates and writes
    the card after the last epoch), then leaves the process group: a process of another node
    that exited first, its group still open, aborted as rank 0's store went away."""
    import torch.distributed as dist

    if fabric.world_size > 1 and dist.is_available() and dist.is_initialized():
        fabric.barrier()
        dist.destroy_process_group()
