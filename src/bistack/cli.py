"""The ``bistack`` command line: argument parsing and thin handlers. Which kind of model a file
or directory holds, and what it can do, comes from the task table (``bistack.tasks``); the work
is in the outlets (``bistack.corpus``, ``bistack.serve``, ``bistack.export``), the studies and
the one training driver. Process-wide settings (offline hub, quiet transformers, threads) are
made here and nowhere else."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bistack._version import __version__
from bistack.corpus.predict import CHUNK_SIZE
from bistack.corpus.sources import INPUT_FORMATS
from bistack.errors import BistackError, ConfigError
from bistack.models.precision import INFERENCE_PRECISIONS, autocast_for
from bistack.onnx_session import is_exported
from bistack.paths import refuse_overlap, refuse_shared_folder
from bistack.process_environment import MODEL_PROCESS_ENVIRONMENT
from bistack.studies.pooler_variants import POOLER_VARIANTS


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
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if threads is not None and torch.get_num_threads() != threads:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bistack", description="Bidirectional and stacked recurrent models for NLP."
    )
    parser.add_argument("--version", action="version", version=f"bistack {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a model from a YAML config")
    train.add_argument("config", help="YAML config file")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set train.max_epochs=30",
    )
    train.add_argument("--output", help="run directory (default: runs/<config name>)")
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a model already in the run directory (it stays until the new run has "
        "its first best model)",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="go on from the checkpoint of a stopped run in --output (same config), as if it "
        "had never stopped",
    )
    train.add_argument(
        "--precision",
        help="Fabric's precision, e.g. bf16-mixed or 16-mixed (default: 32-bit)",
    )
    train.add_argument("--devices", default="1", help="number of processes/devices (default 1)")
    train.add_argument(
        "--num-nodes",
        type=ranged(int, 1),
        default=1,
        metavar="N",
        help="machines, each running --devices processes (launch: see the README's "
        "'Large corpora'; default 1)",
    )
    train.add_argument("--strategy", default="auto", help="Fabric strategy, e.g. ddp")
    train.add_argument("--accelerator", default="cpu", help="cpu, cuda, auto (default cpu)")
    add_matmul_flag(train)
    add_progress_flags(train)
    add_log_format(train)
    add_threads_flag(train)
    train.set_defaults(run=run_train)

    evaluate = commands.add_parser("evaluate", help="score a model on labelled data")
    evaluate.add_argument("model", help="model directory (or a directory bistack export wrote)")
    evaluate.add_argument(
        "data", nargs="+", help="labelled data: CoNLL files, or tables for text models"
    )
    evaluate.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (with several data files: one per file, by its path)",
    )
    evaluate.add_argument(
        "--report",
        metavar="DIR",
        help="write DIR/report.html (offline), its charts and report.json: what the scores mean",
    )
    evaluate.add_argument(
        "--overwrite", action="store_true", help="replace the report an earlier --report wrote"
    )
    evaluate.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    add_matmul_flag(evaluate)
    add_inference_precision(evaluate)
    add_threads_flag(evaluate)
    evaluate.set_defaults(run=run_evaluate)

    predict = commands.add_parser("predict", help="tag, classify or score raw text")
    predict.add_argument("model", help="model directory (or a directory bistack export wrote)")
    predict.add_argument("text", nargs="*", help="texts (one argument each)")
    predict.add_argument(
        "--input",
        metavar="PATH",
        help="what to predict, read as it streams: a file, or - for stdin (default format: "
        "one text a line; .jsonl, .csv, .tsv, .parquet, .conll and .conllu files by their suffix)",
    )
    predict.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="read --input as this format instead of by its suffix",
    )
    predict.add_argument(
        "--tokenized",
        action="store_true",
        help="taggers: one sentence a line, tokens split on whitespace, one tag per given token",
    )
    predict.add_argument(
        "--text-field",
        default="text",
        metavar="NAME",
        help="JSON lines, CSV, TSV, Parquet: the field or column holding the text (default text)",
    )
    predict.add_argument(
        "--id-field",
        metavar="NAME",
        help="JSON lines, CSV, TSV, Parquet: copy this field of each record into its prediction "
        "(each prediction of an --input already carries its line or row)",
    )
    predict.add_argument(
        "--output", metavar="PATH", help="write predictions to PATH (default: stdout)"
    )
    predict.add_argument("--overwrite", action="store_true", help="replace an --output that exists")
    predict.add_argument(
        "--resume",
        action="store_true",
        help="continue an --output whose run was stopped or killed, after its last whole record",
    )
    predict.add_argument(
        "--on-error",
        choices=["stop", "skip"],
        default="stop",
        help="a record that cannot be read or predicted: stop there (default), or skip it and "
        "list it in the skipped-records file",
    )
    predict.add_argument(
        "--skipped",
        metavar="PATH",
        help="the skipped-records file (default: OUTPUT.skipped.jsonl; needed with stdout)",
    )
    predict.add_argument(
        "--workers",
        type=ranged(int, 1),
        default=1,
        metavar="N",
        help="N processes with one torch thread each (default 1: this process, all threads)",
    )
    predict.add_argument(
        "--chunk-size",
        type=ranged(int, 1),
        default=CHUNK_SIZE,
        metavar="N",
        help=f"records predicted together, batched by length (default {CHUNK_SIZE})",
    )
    predict.add_argument(
        "--log-every",
        type=ranged(float, 0.0),
        default=30.0,
        metavar="SECONDS",
        help="off a terminal: a progress line at most this often (default 30)",
    )
    predict.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    predict.add_argument(
        "--format",
        choices=["conll", "jsonl", "conllu", "doccano"],
        help="conll (taggers' default), jsonl (text models' only format), conllu, or doccano "
        "(span JSON lines an annotation tool loads back; taggers)",
    )
    predict.add_argument(
        "--attention",
        action="store_true",
        help="text models: include each token's attention weight",
    )
    predict.add_argument(
        "--min-confidence",
        type=ranged(float, 0.0, 1.0),
        metavar="P",
        help="taggers: leave out entities whose probability is below P (0-1)",
    )
    predict.add_argument(
        "--top-k",
        type=ranged(int, 1),
        default=1,
        metavar="K",
        help="taggers: also the K best analyses of each sentence with their probabilities (jsonl)",
    )
    predict.add_argument(
        "--stream",
        action="store_true",
        help="taggers: read tokens from stdin (whitespace-separated, a blank line ends a "
        "sentence) and print each tag as soon as it is final",
    )
    add_progress_flags(predict)
    add_matmul_flag(predict)
    add_inference_precision(predict)
    add_threads_flag(predict)
    predict.set_defaults(run=run_predict)

    info = commands.add_parser(
        "info", help="what a model directory or an exported one holds (kind, labels, metrics)"
    )
    info.add_argument("model", help="model directory (or a directory bistack export wrote)")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(run=run_info)

    export = commands.add_parser(
        "export", help="export a model to ONNX, to predict without PyTorch (onnxruntime)"
    )
    export.add_argument(
        "model", help="model directory of a recurrent tagger, classifier or regressor"
    )
    export.add_argument("--format", choices=["onnx"], default="onnx", help="onnx (the only one)")
    export.add_argument("--output", required=True, help="directory to write")
    export.add_argument(
        "--overwrite", action="store_true", help="replace what --output holds (when done)"
    )
    add_threads_flag(export)
    export.set_defaults(run=run_export)

    serve = commands.add_parser(
        "serve", help="serve a model over HTTP, with a web page to try it (bistack[serve])"
    )
    serve.add_argument("model", help="model directory (or a directory bistack export wrote)")
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    serve.add_argument(
        "--port", type=ranged(int, 0, 65535), default=8000, help="port (default 8000; 0: any free)"
    )
    serve.add_argument(
        "--max-batch",
        type=ranged(int, 1),
        default=64,
        metavar="N",
        help="texts grouped into one forward pass at most (default 64; 1: no grouping)",
    )
    serve.add_argument(
        "--workers",
        type=ranged(int, 1),
        default=None,
        metavar="N",
        help=f"model processes behind the one port, each with its own copy of the model and "
        f"--threads threads (default: one per CPU, at most {SERVE_DEFAULT_MAX_WORKERS}, "
        "one thread each)",
    )
    serve.add_argument(
        "--ray",
        action="store_true",
        help="serve on Ray Serve (bistack[ray-serve]): the cluster RAY_ADDRESS names, else a "
        "local Ray",
    )
    serve.add_argument(
        "--replicas",
        type=ranged(int, 1),
        default=1,
        metavar="N",
        help="with --ray: Ray Serve replicas of the model, each with --threads CPUs (default 1)",
    )
    serve.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="leave out the JSON line per request that serve writes to stderr",
    )
    add_threads_flag(serve)
    serve.set_defaults(run=run_serve)

    explain = commands.add_parser("explain", help="show a text model's attention (HTML + PNG)")
    explain.add_argument("model", help="model directory of a classifier or regressor")
    explain.add_argument("text", nargs="+", help="texts to explain")
    explain.add_argument("--output", default=".", help="folder for explain.html and explain.png")
    explain.set_defaults(run=run_explain)
    compare = commands.add_parser(
        "compare-poolers", help="train every layer pooler on the same cached backbone vectors"
    )
    compare.add_argument("config", help="YAML config with a backbone section")
    compare.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    compare.add_argument(
        "--poolers", help=f"comma-separated subset (default all: {', '.join(POOLER_VARIANTS)})"
    )
    compare.add_argument(
        "--seeds", type=ranged(int, 1), default=3, help="seeds per pooler (default 3)"
    )
    compare.add_argument(
        "--folds",
        type=ranged(int, 2),
        metavar="K",
        help="K-fold CV over data.train (K >= 2) instead of seeds",
    )
    compare.add_argument("--output", help="folder (default runs/compare-<config name>)")
    add_progress_flags(compare)
    add_log_format(compare)
    compare.add_argument(
        "--finished-only",
        action="store_true",
        help="train nothing: the table of the runs finished so far (of a running or interrupted "
        "comparison)",
    )
    compare.add_argument(
        "--runs",
        nargs="+",
        default=[],
        metavar="RUN",
        help="train only these runs (fold<K> or seed<N>), then show every finished run: lets "
        "processes or machines share one comparison",
    )
    add_threads_flag(compare)
    compare.set_defaults(run=run_compare_poolers)

    ladder = commands.add_parser(
        "ladder", help="the build order, one change at a time, each over several seeds"
    )
    ladder.add_argument("config", help="YAML config of a recurrent tagger, classifier or regressor")
    ladder.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ladder.add_argument(
        "--seeds", type=ranged(int, 1), default=3, help="seeds per rung (default 3)"
    )
    ladder.add_argument("--output", help="folder (default runs/ladder-<config name>)")
    ladder.add_argument(
        "--transformer-states",
        nargs="?",
        const="default",
        metavar="BACKBONE",
        help="taggers: a sixth rung that stacks a transformer's word states beside the "
        "tagger's features (a local model folder; default all-MiniLM-L6-v2)",
    )
    add_progress_flags(ladder)
    add_log_format(ladder)
    add_threads_flag(ladder)
    ladder.set_defaults(run=run_ladder)

    add_tune_command(commands)

    sample = commands.add_parser("sample", help="generate text with a language model")
    sample.add_argument("model", help="model directory of a language model")
    sample.add_argument("prompt", nargs="?", default="", help="text to continue")
    sample.add_argument("--temperature", type=float, default=1.0, help="softmax temperature")
    sample.add_argument(
        "--tokens", type=ranged(int, 1), default=30, help="at most this many tokens"
    )
    sample.add_argument("--seed", type=int, help="random seed, for repeatable samples")
    sample.add_argument("--count", type=ranged(int, 1), default=1, help="how many samples")
    add_threads_flag(sample)
    sample.set_defaults(run=run_sample)

    demo = commands.add_parser("demo", help="train and try a Twitter NER tagger (WNUT-2016)")
    demo.add_argument("--output", default="runs/demo", help="run directory")
    demo.add_argument(
        "--minutes", type=ranged(float, 0.1), default=3.0, help="training time budget"
    )
    add_progress_flags(demo)
    add_threads_flag(demo)
    demo.set_defaults(run=run_demo)
    return parser


def add_matmul_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--matmul-precision",
        choices=["highest", "high", "medium"],
        default="high",
        help="float32 matrix products on a CUDA GPU: high lets Ampere and later use TF32 "
        "tensor cores (default), highest keeps full float32; the CPU is not affected",
    )


def on_device(name: str, args: argparse.Namespace) -> str:
    """``--device`` checked (:func:`checked_device`), with ``--matmul-precision`` applied to
    it."""
    device = checked_device(name)
    if device != "cpu":
        from bistack.models.devices import set_matmul_precision

        set_matmul_precision(device, args.matmul_precision)
    return device


def add_threads_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--threads",
        type=ranged(int, 1),
        metavar="N",
        help="threads per process for the tensor library (default: OMP_NUM_THREADS when set, "
        "else the CPUs this process may use, shared among --devices processes)",
    )


def configure_threads(args: argparse.Namespace) -> None:
    """Apply the thread count a command runs with (``bistack.threads``) before torch or
    onnxruntime start, and warn a training command when the machine is oversubscribed."""
    if not hasattr(args, "threads"):
        return
    from bistack.threads import choose_threads, oversubscription, threads_running_elsewhere

    cpus = len(os.sched_getaffinity(0))
    devices = str(getattr(args, "devices", "1"))
    on_cpu = getattr(args, "accelerator", "cpu") == "cpu"
    processes = int(devices) if devices.isdigit() and on_cpu else 1
    workers = getattr(args, "workers", 1) or 1
    tuning = args.command == "tune"
    if tuning:  # each trial process has its share
        processes, workers = workers, 1
    if args.command == "serve":
        if args.workers is None:
            args.workers = 1 if args.ray else min(cpus, SERVE_DEFAULT_MAX_WORKERS)
        # One thread per server process by default (cpus // cpus): a server process uses one
        # core at most (its event loop and its model thread share the GIL: 0.98 cores measured
        # under 32 clients), and a second torch thread spinning between small kernels takes
        # that core from the event loop (benchmarks/results/serve-load.md has the rows).
        processes, workers = cpus, 1
    try:
        threads = choose_threads(args.threads, os.environ.get("OMP_NUM_THREADS"), cpus, processes)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read by torch when it starts
    if "torch" in sys.modules:  # already started (bistack.cli.main called from Python)
        sys.modules["torch"].set_num_threads(threads)
    args.threads = threads  # an exported model's onnxruntime session takes it too
    if workers > 1:  # each worker process runs one thread (corpus prediction)
        processes, threads = workers, 1
    if args.command == "serve":  # what runs: the server's processes or a local Ray's replicas
        processes = args.replicas if args.ray else args.workers
    if tuning and args.worker_of is not None:  # its parent said it, for all its workers
        return
    if args.command in ("train", "ladder", "compare-poolers", "demo", "tune"):
        # Said in the run's log (stdout), with what else runs now.
        warning = oversubscription(threads, processes, cpus, threads_running_elsewhere())
        if warning:
            say_as(getattr(args, "log_format", "text"))(f"warning: {warning}")
        return
    # Prediction and scoring print their results on stdout: only a choice that cannot fit.
    warning = oversubscription(threads, processes, cpus, 0)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)


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


def show_progress(args: argparse.Namespace) -> bool:
    """Bars on a terminal unless --no-progress; elsewhere (a log file, CI) one line an epoch
    unless --progress."""
    return args.progress or (not args.no_progress and sys.stderr.isatty())


def checked_device(name: str) -> str:
    """A ``--device`` that exists on this machine, or a clear error (the CPU always does, and
    is said without starting torch: an exported model runs without it)."""
    if name == "cpu":
        return name
    from bistack.models.devices import checked_device as check

    try:
        check(name)
    except ConfigError as error:
        raise ConfigError(f"--{error}") from None
    return name


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_compare_poolers(args: argparse.Namespace) -> int:
    from bistack.studies.compare_poolers import compare_poolers
    from bistack.tasks import load_config, task_of

    config = load_config(args.config, args.set)
    if not task_of(config.kind).compares_poolers:
        return fail(f"{args.config}: compare-poolers needs a config with a backbone section")
    poolers = args.poolers.split(",") if args.poolers else list(POOLER_VARIANTS)
    output = args.output or str(Path("runs") / f"compare-{Path(args.config).stem}")
    refuse_overlap(output, [("the config", args.config)], "--output")
    refuse_shared_folder(output, "--output")
    compare_poolers(
        config,  # type: ignore[arg-type]
        output,
        poolers=poolers,
        seeds=args.seeds,
        folds=args.folds,
        progress=show_progress(args),
        finished_only=args.finished_only,
        only_runs=args.runs,
        log_format=args.log_format,
        say=say_as(args.log_format),
    )
    say_as(args.log_format)(f"table and chart in {output}/compare-poolers.{{md,json,png}}")
    return 0


def run_ladder(args: argparse.Namespace) -> int:
    from bistack.studies.ladder import run_ladder as ladder
    from bistack.tasks import load_config

    config = load_config(args.config, args.set)
    output = args.output or str(Path("runs") / f"ladder-{Path(args.config).stem}")
    refuse_overlap(output, [("the config", args.config)], "--output")
    refuse_shared_folder(output, "--output")
    ladder(
        config,
        output,
        seeds=args.seeds,
        transformer=args.transformer_states,
        progress=show_progress(args),
        log_format=args.log_format,
        say=say_as(args.log_format),
    )
    say_as(args.log_format)(f"table and chart in {output}/ladder.{{md,json,png}}")
    return 0


def add_tune_command(commands: Any) -> None:
    tune = commands.add_parser(
        "tune",
        help="search hyperparameters (Optuna), then judge the best against the seed noise",
        description="Search the config keys of a space file with Optuna's TPE sampler, pruning "
        "hopeless trials after each epoch; then retrain the best trial's config and the "
        "starting config with --seeds seeds each and say whether the gain beats the noise. "
        "Each trial is an ordinary training run; an interrupted search goes on when run again.",
    )
    tune.add_argument("config", help="YAML config to start from (any model kind)")
    tune.add_argument(
        "--space",
        required=True,
        help="YAML file: config keys with [low, high], {log: [low, high]}, "
        "{range: [low, high], step: s} or {choice: [...]}",
    )
    tune.add_argument(
        "--trials", type=ranged(int, 1), default=20, help="trials in all (default 20)"
    )
    tune.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    tune.add_argument("--output", help="folder (default runs/tune-<config name>)")
    tune.add_argument(
        "--seeds",
        type=ranged(int, 0),
        default=3,
        help="seeds for each of the best and the starting config in the verdict (default 3; "
        "0: no verdict, as on the helper machines of a shared study)",
    )
    tune.add_argument(
        "--verdict-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of both configs in the verdict only, such as the full epoch budget "
        "(train.max_epochs=40) after trials on a short one; best.yaml has it too",
    )
    tune.add_argument(
        "--storage",
        metavar="URL",
        help="the study's database, any URL Optuna takes (postgresql://..., mysql://...) for "
        "a study several machines share; default an SQLite file in --output",
    )
    tune.add_argument("--study-name", default="tune", help="the study's name in the database")
    tune.add_argument(
        "--workers",
        type=ranged(int, 1),
        default=1,
        help="trial processes on this machine, sharing the CPUs (default 1)",
    )
    tune.add_argument(
        "--startup-trials",
        type=ranged(int, 1),
        default=5,
        help="trials drawn at random before TPE models the space, and complete before pruning "
        "starts (default 5)",
    )
    tune.add_argument("--no-prune", action="store_true", help="let every trial train to its end")
    tune.add_argument(
        "--sampler-seed", type=int, help="seed of the sampler, for a search that repeats"
    )
    tune.add_argument("--worker-of", type=int, help=argparse.SUPPRESS)  # a trial process
    add_threads_flag(tune)
    tune.set_defaults(run=run_tune)


def run_tune(args: argparse.Namespace) -> int:
    from bistack.studies.search_space import read_space
    from bistack.studies.tune import TuneSettings, storage_url, tune
    from bistack.tasks import load_config

    try:  # the trials' lines are ours: Optuna's own per-trial log lines would repeat them
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
    except ImportError:
        return fail("tune needs Optuna: pip install 'bistack[tune]'")
    config = load_config(args.config, args.set)
    space = read_space(args.space, config)
    output = Path(args.output or Path("runs") / f"tune-{Path(args.config).stem}")
    inputs = [("the config", args.config), ("the space", args.space)]
    refuse_overlap(output, inputs, "--output")  # fmt: skip
    refuse_shared_folder(output, "--output")
    settings = TuneSettings(
        trials=args.trials,
        seeds=args.seeds,
        storage=args.storage,
        study_name=args.study_name,
        startup=args.startup_trials,
        prune=not args.no_prune,
        sampler_seed=args.sampler_seed,
        verdict_set=tuple(args.verdict_set),
    )
    if args.worker_of is not None:  # one of a tune's trial processes: search, and end with it
        from bistack.processes import die_with

        die_with(args.worker_of)
        tune(config, space, output, settings, report=False)
        return 0

    def worker_argv(index: int) -> list[str]:
        argv = ["tune", args.config, "--space", args.space, "--trials", str(args.trials)]
        argv += ["--output", str(output), "--storage", storage_url(output, args.storage)]
        argv += ["--study-name", args.study_name, "--startup-trials", str(args.startup_trials)]
        argv += ["--threads", str(args.threads)]
        argv += ["--no-prune"] if args.no_prune else []
        if args.sampler_seed is not None:  # one seed each: the same one would repeat values
            argv += ["--sampler-seed", str(args.sampler_seed + index)]
        return argv + [item for override in args.set for item in ("--set", override)]

    tune(config, space, output, settings, workers=args.workers, worker_argv=worker_argv)
    return 0


def run_sample(args: argparse.Namespace) -> int:
    from bistack.tasks import open_model, task_of_directory

    if args.temperature <= 0:
        return fail("--temperature must be > 0")
    card = task_of_directory(args.model)
    if not card.samples:
        return fail(f"{args.model} holds {card.description}, which does not sample text")
    model = open_model(args.model).model
    for index in range(args.count):
        seed = None if args.seed is None else args.seed + index
        tokens = model.sample(args.prompt, args.tokens, args.temperature, seed)
        print(" ".join([args.prompt, *tokens]).strip())
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from bistack.studies.demo import run_demo as demo

    demo(args.output, args.minutes, progress=show_progress(args))
    return 0


def run_train(args: argparse.Namespace) -> int:
    from bistack.runs.driver import RunOptions
    from bistack.tasks import load_config
    from bistack.training import train_config

    config = load_config(args.config, args.set)
    output = args.output or str(Path("runs") / Path(args.config).stem)
    refuse_overlap(output, [("the config", args.config)], "--output")
    refuse_shared_folder(output, "--output")
    options = RunOptions(
        devices=int(args.devices) if args.devices.isdigit() else args.devices,
        num_nodes=args.num_nodes,
        strategy=args.strategy,
        accelerator=args.accelerator,
        precision=args.precision,
        matmul_precision=args.matmul_precision,
        progress=show_progress(args),
        overwrite=args.overwrite,
        resume=args.resume,
        log_format=args.log_format,
    )
    if args.resume and args.overwrite:
        raise ConfigError("--resume goes on with the run in --output; --overwrite replaces it")
    train_config(config, output, options)
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from bistack.tasks import open_model

    if args.overwrite and not args.report:
        raise ConfigError("--overwrite replaces an earlier --report; give --report DIR with it")
    device = on_device(args.device, args)
    opened = open_model(args.model, device, args.threads)
    refuse_precision_of_export(args.model, opened.exported, args.precision)
    with autocast_for(device, args.precision):
        found = evaluations(opened, args)
    if args.json:
        scores = {path: json_scores for path, (json_scores, _) in found.items()}
        print(json.dumps(scores[args.data[0]] if len(scores) == 1 else scores))
    else:
        for path, (_, report) in found.items():
            print(f"== {path}\n{report}" if len(found) > 1 else report)
    return 0


def evaluations(opened: Any, args: argparse.Namespace) -> dict[str, tuple[Any, str]]:
    """Each data file's scores, as JSON and as text; with ``--report``, the report written."""
    if not args.report:
        found = {}
        for path in args.data:
            report = opened.evaluate(path)
            found[path] = (report.to_json(), str(report))
        return found
    from bistack.reports.write import write_report

    sections = write_report(opened, args.data, args.report, overwrite=args.overwrite)
    print(f"wrote {Path(args.report) / 'report.html'}, its charts and report.json",
          file=sys.stderr)  # fmt: skip
    return {s["data"]: (s["scores"], s["summary"]) for s in sections}


def refuse_precision_of_export(model: str, exported: bool, precision: str) -> None:
    """``--precision`` acts on a PyTorch model's passes; an exported model runs its graph as
    exported."""
    if precision != "32" and exported:
        raise ConfigError(
            f"--precision {precision}: {model} is an exported model, which runs its graph in "
            "float32 on onnxruntime; give the PyTorch model directory for mixed precision"
        )


def add_inference_precision(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--precision",
        choices=INFERENCE_PRECISIONS,
        default="32",
        help="a PyTorch model's passes: 32 (as trained), or bf16-mixed / 16-mixed (autocast: "
        "faster on a GPU; the scores and probabilities may move in the last digits)",
    )


def run_info(args: argparse.Namespace) -> int:
    from bistack.info import described, model_info

    info = model_info(args.model)
    print(json.dumps(info) if args.json else described(info))
    return 0


def run_export(args: argparse.Namespace) -> int:
    from bistack.export.onnx_export import export_model

    output = export_model(args.model, args.output, overwrite=args.overwrite)
    files = ", ".join(sorted(path.name for path in output.iterdir()))
    print(f"exported {args.model} to {output} ({files})")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    if args.ray and args.workers > 1:
        raise ConfigError("--workers is for serving here; on Ray Serve say --replicas")
    if args.replicas > 1 and not args.ray:
        raise ConfigError("--replicas is for Ray Serve (--ray); here say --workers")
    if args.ray:
        try:
            import ray.serve  # noqa: F401 (only whether it is there)
        except ImportError as error:
            raise ConfigError(
                f"serving on Ray needs the ray-serve extra ({error.name} is missing): "
                "pip install 'bistack[ray-serve]'"
            ) from None
    try:
        from bistack.serve.app import Limits
        from bistack.serve.server import serve, serve_in_workers
    except ImportError as error:
        raise ConfigError(
            f"serving needs the serve extra ({error.name} is missing): pip install 'bistack[serve]'"
        ) from None
    from bistack.serve.served import checked_apart, load_served

    limits = Limits(max_batch_texts=args.max_batch)
    where = (args.host, args.port, limits, args.model)
    if not args.ray and args.workers == 1:
        # One that does not load stops here, before the port is bound.
        serve(load_served(args.model, args.threads), *where, args.access_log)
        return 0
    description = checked_apart(args.model, args.threads)  # each worker or replica opens its own
    if args.ray:
        from bistack.serve.server import serve_on_ray

        # Ray Serve gives its HTTP proxy 5 s to say it is ready; on a small machine with busy
        # cores it takes longer, and is killed and restarted, again and again.
        os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
        serve_on_ray(description, *where, args.replicas, args.threads)
        return 0
    settings = {"model": args.model, "threads": args.threads, "access_log": args.access_log}
    settings["limits"] = dataclasses.asdict(limits)
    metrics = tempfile.mkdtemp(prefix="bistack-serve-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics  # where the workers' metrics meet
    try:
        serve_in_workers(description, args.host, args.port, args.workers, settings)
    finally:
        shutil.rmtree(metrics, ignore_errors=True)
    return 0


SERVE_DEFAULT_MAX_WORKERS = 8  # each worker holds its own copy of the model


def run_explain(args: argparse.Namespace) -> int:
    from bistack.studies.explain import explain
    from bistack.tasks import open_model, task_of_directory

    card = task_of_directory(args.model)
    if "attention" not in card.predict_options:
        return fail(
            f"{args.model} holds {card.description}, which has no token attention weights to "
            "show; explain needs a classifier or regressor with 'additive' or 'dot' pooling"
        )
    for written in ("explain.html", "explain.png"):  # what it writes: never into the model
        refuse_overlap(Path(args.output) / written, [("the model directory", args.model)])
    page, chart = explain(open_model(args.model).model, args.text, args.output)
    print(f"wrote {page} and {chart}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from bistack.corpus.command import CorpusRequest, predict_command
    from bistack.corpus.predict import Spec
    from bistack.tasks import open_model, task_of_directory

    card = task_of_directory(args.model)
    device = on_device(args.device, args)
    refuse_precision_of_export(args.model, is_exported(args.model), args.precision)
    if args.stream:
        with autocast_for(device, args.precision):
            return stream_tags(open_model(args.model, device).streamer())
    if not card.predict_formats:
        return fail(card.predict_hint)
    fmt = args.format or card.predict_formats[0]
    if fmt not in card.predict_formats:
        formats = " or ".join(card.predict_formats)
        return fail(f"--format {fmt} is not for {card.description}; it writes {formats}")
    options = predict_options(args)
    for option in options:
        if option not in card.predict_options:
            flag = "--" + option.replace("_", "-")
            return fail(f"{flag} is not for {card.description} ({args.model})")
    request = CorpusRequest(
        texts=list(args.text),
        input=args.input,
        input_format=args.input_format,
        tokenized=args.tokenized,
        text_field=args.text_field,
        id_field=args.id_field,
        output=args.output,
        overwrite=args.overwrite,
        resume=args.resume,
        on_error=args.on_error,
        skipped=args.skipped,
        workers=args.workers,
        chunk_size=args.chunk_size,
        log_every=args.log_every,
        progress=show_progress(args),
    )
    spec = Spec(
        args.model, fmt, device=device, options=options, threads=args.threads,
        precision=args.precision,
    )  # fmt: skip
    return predict_command(request, spec, card)


def predict_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of ``predict`` a user asked for, as ``Model.predict`` keywords."""
    options: dict[str, Any] = {"attention": True} if args.attention else {}
    if args.min_confidence is not None:
        options["min_confidence"] = args.min_confidence
    if args.top_k != 1:
        options["top_k"] = args.top_k
    return options


def stream_tags(stream: Any) -> int:
    """Tag stdin token by token, printing ``token<TAB>tag`` lines as tags become final."""
    for line in sys.stdin:
        if not line.strip():
            write_pairs(stream.flush())
            print(flush=True)
            continue
        for token in line.split():
            write_pairs(stream.push(token))
    write_pairs(stream.flush())
    return 0


def write_pairs(pairs: list[tuple[str, str]]) -> None:
    for token, tag in pairs:
        print(f"{token}\t{tag}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
