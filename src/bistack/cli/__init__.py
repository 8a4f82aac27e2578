"""The ``bistack`` command line: argument parsing and a call into the library, one module per
family of subcommands (``train``; ``predict``, ``evaluate`` and ``sample``; ``serve``;
``tune``; ``cv``; ``blend``; the studies; ``info`` and ``export``), each with
``add(subparsers)`` giving its commands their flags, the function that runs each, and what
each says of its processes (``bistack.cli.flags.Processes``). Process-wide settings (offline
hub, quiet transformers, threads) are made here and nowhere else."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

from bistack._version import __version__
from bistack.cli import blend, cv, models, predict, serve, studies, train, tune
from bistack.cli.flags import one_process
from bistack.errors import BistackError, ConfigError
from bistack.system.environment import MODEL_PROCESS_ENVIRONMENT

FAMILIES = (train, predict, models, serve, cv, blend, studies, tune)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Called from Python (a notebook, a test), it leaves the process as it
    found it: the environment variables the command sets for its own run and a running torch's
    thread count are put back when it returns."""
    with settings_put_back():
        for name, value in MODEL_PROCESS_ENVIRONMENT.items():  # offline, quiet, a bounded cache
            os.environ.setdefault(name, value)
        return run_command(argv)


@contextlib.contextmanager
def settings_put_back() -> Iterator[None]:
    """Restore the variables ``main`` may set, and torch's thread count when torch was
    running before it (one imported by the command keeps the count it started with)."""
    names = (*MODEL_PROCESS_ENVIRONMENT, "OMP_NUM_THREADS")
    before = {name: os.environ.get(name) for name in names}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    # transformers reads HF_HUB_DISABLE_PROGRESS_BARS when first imported: one imported before
    # (a notebook's, a test's) would show its "Loading weights" bar at every model a command
    # opens, so it is held back for the command and put back after.
    loaded = sys.modules.get("transformers.utils.logging")
    bars = loaded.is_progress_bar_enabled() if loaded is not None else False
    if loaded is not None:
        loaded.disable_progress_bar()
    try:
        yield
    finally:
        if loaded is not None and bars:
            loaded.enable_progress_bar()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if torch is not None and threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


def run_command(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_threads(args)
        return int(args.run(args) or 0)
    except BistackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the machine's word: a folder where a file was expected, a full disk
        where = f"{error.filename}: " if error.filename else ""
        print(f"error: {where}{error.strerror or error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    """Every family's commands; a kind's predict options and formats come from the task table
    as it stands now (a kind registered at run time has its flags too)."""
    parser = argparse.ArgumentParser(
        prog="bistack", description="Bidirectional and stacked recurrent models for NLP."
    )
    parser.add_argument("--version", action="version", version=f"bistack {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add(commands)
    return parser


def configure_threads(args: argparse.Namespace) -> None:
    """Apply the thread count a command runs with (``bistack.system.threads``) before torch or
    onnxruntime start, and say when the processes it runs oversubscribe the machine: a command
    that trains keeps the warning (``args.cpu_warning``) for its run's log once its config
    has passed its checks (:func:`bistack.cli.flags.say_cpu_warning`), counting the threads
    other programs run unless the user chose the count; one that predicts or scores says it on
    stderr (its results are on stdout), only for threads of its own that cannot fit."""
    args.cpu_warning = None
    if not hasattr(args, "threads"):
        return
    chosen = args.threads is not None or os.environ.get("OMP_NUM_THREADS") is not None
    from bistack.system.threads import choose_threads, oversubscription, threads_running_elsewhere

    cpus = len(os.sched_getaffinity(0))
    plan = getattr(args, "processes", one_process)(args, cpus)
    try:
        threads = choose_threads(
            args.threads, os.environ.get("OMP_NUM_THREADS"), cpus, plan.sharing
        )
    except ValueError as error:
        raise ConfigError(str(error)) from None
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read by torch when it starts
    if "torch" in sys.modules:  # already started (bistack.cli.main called from Python)
        sys.modules["torch"].set_num_threads(threads)
    args.threads = threads  # an exported model's onnxruntime session takes it too
    running = plan.running or plan.sharing
    each = 1 if plan.one_thread else threads
    if plan.log is not None:  # the advice is for a count bistack chose
        others = 0 if chosen else threads_running_elsewhere()
        args.cpu_warning = oversubscription(each, running, cpus, others)
    else:
        warning = oversubscription(each, running, cpus, 0)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
