"""Flags several commands share, each written once with its help, and what a command says of
its processes (:class:`Processes`: how they share this machine's CPUs)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bistack.cards import PredictOption
from bistack.errors import ConfigError
from bistack.models.precision import INFERENCE_PRECISIONS


@dataclass(frozen=True)
class Processes:
    """How a command's processes share the CPUs: ``sharing`` processes divide them (which sets
    each one's default thread count); ``running`` processes then run (None: ``sharing``), each
    with one thread when ``one_thread`` (corpus prediction's workers); ``log``: the log format
    of a command that trains, whose warning goes into its run's log and counts the threads other
    programs run."""

    sharing: int = 1
    running: int | None = None
    one_thread: bool = False
    log: str | None = None


def one_process(args: argparse.Namespace, cpus: int) -> Processes:
    """The default: this process alone, answering on stdout (a warning goes to stderr)."""
    return Processes()


def ranged(kind: type, low: float | None = None, high: float | None = None) -> Any:
    """An argparse type: ``kind`` between ``low`` and ``high`` (inclusive), a usage error
    otherwise."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        below = low is not None and value < low
        if value != value or below or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def option_type(option: PredictOption) -> Any:
    """An argparse type for a card's option: its kind, within its declared range (a usage
    error saying the range otherwise, as the option's own check says it)."""

    def parse(text: str) -> Any:
        try:
            value = option.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value != value or not option.within(value):
            raise argparse.ArgumentTypeError(f"must be {option.bounds()}, got {text}")
        return value

    parse.__name__ = option.kind.__name__
    return parse


def add_card_options(
    command: argparse.ArgumentParser,
    options: Sequence[PredictOption],
    dest: Callable[[PredictOption], str],
    help: Callable[[PredictOption], str],
) -> None:
    """A flag for each declared option (``--top-k`` for ``top_k``), with its range and help,
    stored under ``dest(option)``."""
    for option in options:
        if option.kind is bool:
            command.add_argument(
                option.flag, dest=dest(option), action="store_true", help=help(option)
            )
            continue
        command.add_argument(
            option.flag,
            dest=dest(option),
            type=option_type(option),
            default=option.default,
            metavar=option.metavar,
            help=help(option),
        )


def add_config_file(command: argparse.ArgumentParser, what: str) -> None:
    """The positional config: a YAML file, or a packaged recipe as ``recipe:NAME`` (``bistack
    recipes`` lists them), handed on as the file it names."""

    def config_path(text: str) -> str:
        from bistack.config.recipes import config_file

        try:
            return str(config_file(text))
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    command.add_argument(
        "config", type=config_path, help=f"{what}, or recipe:NAME (see bistack recipes)"
    )


def add_overrides(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set train.max_epochs=30 (repeatable)",
    )


def add_model(command: argparse.ArgumentParser, what: str = "") -> None:
    command.add_argument(
        "model", help=what or "model directory (or a directory bistack export wrote)"
    )


def add_device(command: argparse.ArgumentParser) -> None:
    command.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")


def add_matmul_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--matmul-precision",
        choices=["highest", "high", "medium"],
        default="high",
        help="float32 matrix products on a CUDA GPU: high lets Ampere and later use TF32 "
        "tensor cores (default), highest keeps full float32; the CPU is not affected",
    )


def add_training_device(command: argparse.ArgumentParser) -> None:
    """Where and how a command's runs train: ``--accelerator`` and ``--precision``."""
    command.add_argument(
        "--accelerator",
        default="auto",
        help="auto (a GPU when there is one, else the CPU; default), cpu, cuda, ...",
    )
    command.add_argument(
        "--precision",
        help="Fabric's precision, e.g. bf16-mixed or 16-mixed (default: 32-bit)",
    )


def add_inference_precision(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--precision",
        choices=INFERENCE_PRECISIONS,
        help="a PyTorch model's passes: bf16-mixed / 16-mixed (autocast: faster on a GPU; the "
        "scores and probabilities may move in the last digits), or 32 (refused for a model "
        "whose frozen backbone trained in bf16-mixed); default: as trained",
    )


def add_threads_flag(
    command: argparse.ArgumentParser, default: str = "the CPUs this process may use"
) -> None:
    """``--threads``; ``default``: the count the command chooses itself, as its help says it
    (naming only flags the command has)."""
    command.add_argument(
        "--threads",
        type=ranged(int, 1),
        metavar="N",
        help="threads per process for the tensor library (default: OMP_NUM_THREADS when set, "
        f"else {default})",
    )


def add_progress_flags(command: argparse.ArgumentParser) -> None:
    """The same progress flags on every command that shows progress."""
    shown = command.add_mutually_exclusive_group()
    shown.add_argument(
        "--no-progress", action="store_true", help="no progress bars (the default off a terminal)"
    )
    shown.add_argument(
        "--progress", action="store_true", help="progress bars even when not on a terminal"
    )


def add_log_format(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object a line (each epoch's metrics, then messages), for machines",
    )


def say_as(log_format: str) -> Callable[[str], None]:
    """How a command that trains many runs reports its own lines."""
    if log_format == "json":
        return lambda text: print(json.dumps({"event": "message", "text": text}), flush=True)
    return lambda text: print(text, flush=True)


def say_cpu_warning(args: argparse.Namespace) -> None:
    """A training command's CPU warning (``configure_threads``), said in its log once its
    config is read and checked: a config that fails says only why."""
    if getattr(args, "cpu_warning", None):
        say_as(getattr(args, "log_format", "text"))(f"warning: {args.cpu_warning}")


def show_progress(args: argparse.Namespace) -> bool:
    """Bars on a terminal unless --no-progress; elsewhere (a log file, CI) one line an epoch
    unless --progress."""
    return args.progress or (not args.no_progress and sys.stderr.isatty())


def checked_device(name: str) -> str:
    """A ``--device`` that exists on this machine, or a clear error (the CPU always does, and
    is said without starting torch: an exported model runs without it)."""
    if name == "cpu":
        return name
    from bistack.devices.choice import checked_device as check

    try:
        check(name)
    except ConfigError as error:
        raise ConfigError(f"--{error}") from None
    return name


def on_device(name: str, args: argparse.Namespace) -> str:
    """``--device`` checked (:func:`checked_device`), with ``--matmul-precision`` applied to
    it."""
    device = checked_device(name)
    if device != "cpu":
        from bistack.devices.choice import set_matmul_precision

        set_matmul_precision(device, args.matmul_precision)
    return device


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
