"""The ``bistack`` command line: argument parsing only. Which kind of model a file or directory
holds, and what it can do, comes from the task table (``bistack.tasks``); the work is in the
recipes. Process-wide settings (offline hub, quiet transformers) are made here and nowhere else."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bistack import __version__
from bistack.corpus.predict import CHUNK_SIZE, Spec
from bistack.corpus.sources import INPUT_FORMATS
from bistack.errors import BistackError, ConfigError
from bistack.recipes.pooler_variants import POOLER_VARIANTS


def main(argv: Sequence[str] | None = None) -> int:
    # Nothing is downloaded at run time, and transformers' warnings and bars are not ours.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
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
        type=int,
        default=1,
        metavar="N",
        help="machines, each running --devices processes (launch: see the README's "
        "'Large corpora'; default 1)",
    )
    train.add_argument("--strategy", default="auto", help="Fabric strategy, e.g. ddp")
    train.add_argument("--accelerator", default="cpu", help="cpu, cuda, auto (default cpu)")
    add_progress_flags(train)
    add_log_format(train)
    add_threads_flag(train)
    train.set_defaults(run=run_train)

    evaluate = commands.add_parser("evaluate", help="score a model on labelled data")
    evaluate.add_argument("model", help="model directory")
    evaluate.add_argument("data", help="labelled data: a CoNLL file, or a table for text models")
    evaluate.add_argument("--json", action="store_true", help="print one JSON object")
    evaluate.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
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
        type=int,
        default=1,
        metavar="N",
        help="N processes with one torch thread each (default 1: this process, all threads)",
    )
    predict.add_argument(
        "--chunk-size",
        type=int,
        default=CHUNK_SIZE,
        metavar="N",
        help=f"records predicted together, batched by length (default {CHUNK_SIZE})",
    )
    predict.add_argument(
        "--log-every",
        type=float,
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
        type=float,
        metavar="P",
        help="taggers: leave out entities whose probability is below P (0-1)",
    )
    predict.add_argument(
        "--top-k",
        type=int,
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
    add_threads_flag(predict)
    predict.set_defaults(run=run_predict)

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
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free)")
    serve.add_argument(
        "--max-batch",
        type=int,
        default=64,
        metavar="N",
        help="texts grouped into one forward pass at most (default 64; 1: no grouping)",
    )
    serve.add_argument(
        "--batch-window",
        type=float,
        default=5.0,
        metavar="MS",
        help="milliseconds a forward pass waits for more requests (default 5)",
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
    compare.add_argument("--seeds", type=int, default=3, help="seeds per pooler (default 3)")
    compare.add_argument(
        "--folds", type=int, default=0, help="K-fold CV over data.train instead of seeds"
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
    ladder.add_argument("--seeds", type=int, default=3, help="seeds per rung (default 3)")
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

    sample = commands.add_parser("sample", help="generate text with a language model")
    sample.add_argument("model", help="model directory of a language model")
    sample.add_argument("prompt", nargs="?", default="", help="text to continue")
    sample.add_argument("--temperature", type=float, default=1.0, help="softmax temperature")
    sample.add_argument("--tokens", type=int, default=30, help="at most this many tokens")
    sample.add_argument("--seed", type=int, help="random seed, for repeatable samples")
    sample.add_argument("--count", type=int, default=1, help="how many samples")
    add_threads_flag(sample)
    sample.set_defaults(run=run_sample)

    demo = commands.add_parser("demo", help="train and try a Twitter NER tagger (WNUT-2016)")
    demo.add_argument("--output", default="runs/demo", help="run directory")
    demo.add_argument("--minutes", type=float, default=3.0, help="training time budget")
    add_progress_flags(demo)
    add_threads_flag(demo)
    demo.set_defaults(run=run_demo)
    return parser


def add_threads_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="threads per process for the tensor library (default: OMP_NUM_THREADS when set, "
        "else the CPUs this process may use, shared among --devices processes)",
    )


def configure_threads(args: argparse.Namespace) -> None:
    """Apply the thread count a command runs with (``bistack.threads``) before torch or
    onnxruntime start, and warn a training command when the machine is oversubscribed."""
    if not hasattr(args, "threads"):
        return
    from bistack.threads import choose_threads, oversubscription

    cpus = len(os.sched_getaffinity(0))
    devices = str(getattr(args, "devices", "1"))
    on_cpu = getattr(args, "accelerator", "cpu") == "cpu"
    processes = int(devices) if devices.isdigit() and on_cpu else 1
    workers = getattr(args, "workers", 1) or 1
    try:
        threads = choose_threads(args.threads, os.environ.get("OMP_NUM_THREADS"), cpus, processes)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read by torch when it starts
    if "torch" in sys.modules:  # already started (bistack.cli.main called from Python)
        sys.modules["torch"].set_num_threads(threads)
    if args.command in ("predict", "evaluate", "serve"):  # an exported model's onnxruntime
        from bistack.export import runtime

        runtime.SESSION_THREADS = threads
    args.threads = threads
    if workers > 1:  # each worker process runs one thread (corpus prediction)
        processes, threads = workers, 1
    if args.command in ("train", "ladder", "compare-poolers", "demo"):
        # Said in the run's log (stdout), with what else runs now: the tasks running, less
        # this one (the 4th field of /proc/loadavg counts it).
        warning = oversubscription(threads, processes, cpus, max(0, running_tasks() - 1))
        if warning:
            say_as(getattr(args, "log_format", "text"))(f"warning: {warning}")
        return
    # Prediction and scoring print their results on stdout: only a choice that cannot fit.
    warning = oversubscription(threads, processes, cpus, 0)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)


def running_tasks() -> int:
    """Tasks running on the machine right now, this one included (Linux; 1 elsewhere)."""
    try:
        with open("/proc/loadavg") as handle:
            return int(handle.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 1


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
    """A ``--device`` that exists on this machine, or a clear error."""
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"--device {name}: not a device (cpu, cuda, cuda:1, mps, ...)") from None
    if device.type == "cuda" and (
        not torch.cuda.is_available() or (device.index or 0) >= torch.cuda.device_count()
    ):
        raise ConfigError(f"--device {name}: no such CUDA device on this machine")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"--device {name}: MPS is not available on this machine")
    return name


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_compare_poolers(args: argparse.Namespace) -> int:
    from bistack.recipes.compare_poolers import compare_poolers
    from bistack.tasks import load_config, task_of

    if args.seeds < 1:
        return fail("--seeds must be >= 1")
    config = load_config(args.config, args.set)
    if not task_of(config.kind).compares_poolers:
        return fail(f"{args.config}: compare-poolers needs a config with a backbone section")
    poolers = args.poolers.split(",") if args.poolers else list(POOLER_VARIANTS)
    output = args.output or str(Path("runs") / f"compare-{Path(args.config).stem}")
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
    from bistack.recipes.ladder import run_ladder as ladder
    from bistack.tasks import load_config

    if args.seeds < 1:
        return fail("--seeds must be >= 1")
    config = load_config(args.config, args.set)
    output = args.output or str(Path("runs") / f"ladder-{Path(args.config).stem}")
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


def run_sample(args: argparse.Namespace) -> int:
    from bistack.api.language_model import LanguageModel

    if args.temperature <= 0:
        return fail("--temperature must be > 0")
    model = LanguageModel.load(args.model)
    for index in range(args.count):
        seed = None if args.seed is None else args.seed + index
        tokens = model.sample(args.prompt, args.tokens, args.temperature, seed)
        print(" ".join([args.prompt, *tokens]).strip())
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from bistack.recipes.demo import run_demo as demo

    demo(args.output, args.minutes, progress=show_progress(args))
    return 0


def run_train(args: argparse.Namespace) -> int:
    from bistack.recipes.driver import RunOptions
    from bistack.tasks import load_config, train

    config = load_config(args.config, args.set)
    output = args.output or str(Path("runs") / Path(args.config).stem)
    options = RunOptions(
        devices=int(args.devices) if args.devices.isdigit() else args.devices,
        num_nodes=args.num_nodes,
        strategy=args.strategy,
        accelerator=args.accelerator,
        precision=args.precision,
        progress=show_progress(args),
        overwrite=args.overwrite,
        resume=args.resume,
        log_format=args.log_format,
    )
    if args.resume and args.overwrite:
        raise ConfigError("--resume goes on with the run in --output; --overwrite replaces it")
    train(config, output, options)
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from bistack.export.runtime import is_exported, load_exported

    if is_exported(args.model):
        exported_on_cpu(args.device)
        model = load_exported(args.model)
    else:
        from bistack.tasks import task_of_directory

        device = checked_device(args.device)
        model = task_of_directory(args.model).model.load(args.model, device)
    report = model.evaluate(args.data)
    print(json.dumps(report.to_json()) if args.json else str(report))
    return 0


def exported_on_cpu(device: str) -> None:
    if device != "cpu":
        raise ConfigError(
            f"--device {device}: an exported model runs on onnxruntime's CPU provider; "
            "predict with the PyTorch model directory to use another device"
        )


def run_export(args: argparse.Namespace) -> int:
    from bistack.export.onnx_export import export_model

    output = export_model(args.model, args.output, overwrite=args.overwrite)
    files = ", ".join(sorted(path.name for path in output.iterdir()))
    print(f"exported {args.model} to {output} ({files})")
    return 0


def run_serve(args: argparse.Namespace) -> int:
    import socket

    try:
        import uvicorn

        from bistack.serve.app import Limits, create_app
    except ImportError as error:
        raise ConfigError(
            f"serving needs the serve extra ({error.name} is missing): pip install 'bistack[serve]'"
        ) from None
    from bistack.serve.served import load_served

    if args.max_batch < 1 or args.batch_window < 0:
        return fail("--max-batch must be >= 1 and --batch-window >= 0")
    served = load_served(args.model)  # a model that does not load stops here, before binding
    limits = Limits(batch_window=args.batch_window / 1000, max_batch_texts=args.max_batch)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off only on sockets that
    # say they are TCP, and with it on every keep-alive response waited ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
        sock.listen(2048)  # connections wait in the backlog until the server accepts them
    except OSError as error:
        sock.close()
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {error.strerror}") from None
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    print(
        f"serving {served.description} from {args.model} on http://{shown_host}:{port} "
        "(the page at /, the API docs at /docs); Ctrl-C stops",
        flush=True,
    )
    config = uvicorn.Config(create_app(served, limits), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def run_explain(args: argparse.Namespace) -> int:
    from bistack.recipes.explain import explain
    from bistack.tasks import task_of_directory

    task = task_of_directory(args.model)
    if "attention" not in task.predict_options:
        return fail(
            f"{args.model} holds {task.description}, which has no token attention weights to "
            "show; explain needs a classifier or regressor with 'additive' or 'dot' pooling"
        )
    page, chart = explain(task.model.load(args.model), args.text, args.output)
    print(f"wrote {page} and {chart}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    # oneDNN caches a compiled kernel per tensor shape, up to 1,024 of them, and a corpus's
    # batches come in ever new shapes: the cache grew RSS by 30 MB over 60k lines. 16 entries
    # keep memory flat at the same speed (CoNLL dev x3: 9.2 s either way). Read once, when
    # torch first runs a oneDNN kernel, so it is set before torch is imported.
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")
    from bistack.export.runtime import is_exported

    loaded = None  # an exported model is loaded here, to learn what it can do
    if is_exported(args.model):
        from bistack.export.runtime import load_exported

        if args.stream:
            return fail(f"{args.model} is an exported model, which cannot stream")
        exported_on_cpu(args.device)
        loaded = load_exported(args.model)
        formats, allowed = loaded.PREDICT_FORMATS, loaded.PREDICT_OPTIONS
        description = loaded.description
    else:
        from bistack.tasks import task_of_directory

        task = task_of_directory(args.model)
        if args.stream:
            if task.stream is None:
                return fail(
                    f"{args.model} holds {task.description}; only a recurrent tagger can stream "
                    "(a transformer backbone reads the whole sentence in both directions)"
                )
            return stream_tags(task.stream(task.model.load(args.model)))
        if not task.predict_formats:
            return fail(task.predict_hint)
        formats, allowed, description = task.predict_formats, task.predict_options, task.description
        checked_device(args.device)

    fmt = args.format or formats[0]
    if fmt not in formats:
        return fail(f"--format {fmt} is not for {description}; it writes {' or '.join(formats)}")
    options = predict_options(args)
    for option in options:
        if option not in allowed:
            flag = "--" + option.replace("_", "-")
            return fail(f"{flag} is not for {description} ({args.model})")
    spec = Spec(
        args.model,
        fmt,
        exported=loaded is not None,
        device=args.device,
        options=options,
        takes_tokens="conll" in formats,  # a model that writes tags per token takes tokens
    )
    return predict_to_output(args, spec, description, loaded)


def predict_to_output(
    args: argparse.Namespace, spec: Spec, description: str, loaded: Any = None
) -> int:
    """``bistack predict`` on TEXT arguments or a streamed ``--input``, to stdout or a
    resumable ``--output``; ``loaded``: the model, when it is loaded already."""
    from bistack.corpus.outputs import FileOutput, StdoutOutput
    from bistack.corpus.predict import Progress, load_model, predict_corpus
    from bistack.corpus.sources import TOKEN_FORMATS, Record, input_format, read_records

    if args.text and args.input:
        return fail("give TEXT arguments or --input PATH, not both")
    if not args.text and not args.input:
        return fail("nothing to predict: give TEXT arguments or --input PATH")
    if args.workers < 1 or args.chunk_size < 1:
        return fail("--workers and --chunk-size must be >= 1")
    if args.workers > 1 and spec.device != "cpu":
        return fail("--workers runs processes on the CPU; use one process for --device")
    if args.resume and (not args.input or args.input == "-" or not args.output):
        return fail("--resume continues an --output file predicted from an --input file")
    if args.input:
        fmt = input_format(args.input, args.input_format, args.tokenized)
        if fmt in TOKEN_FORMATS and not spec.takes_tokens:
            return fail(f"{fmt} input gives tokens, which only a tagger takes; "
                        f"{args.model} holds {description}")  # fmt: skip
        records = read_records(args.input, fmt, args.text_field)
        source = args.input if args.input != "-" else "<stdin>"
    else:
        fmt, source = "arguments", "argument"
        records = iter([Record(text=text, line=n) for n, text in enumerate(args.text, 1)])
    skipped = Path(args.skipped) if args.skipped else None
    output: FileOutput | StdoutOutput
    if args.output:
        path = Path(args.output)
        settings = {"model": str(Path(spec.model).resolve()), "input": str(Path(args.input)
                    .resolve()) if args.input else None, "input_format": fmt,
                    "text_field": args.text_field, "format": spec.fmt,
                    "options": spec.options}  # fmt: skip
        skipped = skipped or path.with_name(path.name + ".skipped.jsonl")
        model = loaded or load_model(spec)  # one that does not load stops here, before any output
        output = FileOutput(path, skipped, settings, args.resume, args.overwrite)
    else:
        if args.on_error == "skip" and skipped is None:
            return fail("--on-error skip lists what it skips in a file: give --skipped PATH "
                        "(or --output PATH, beside which it goes)")  # fmt: skip
        model = loaded or load_model(spec)
        output = StdoutOutput(skipped)
    progress = Progress(
        bar=bool(args.input) and show_progress(args),
        every=args.log_every,
        already=output.records_done,
    )
    if args.workers > 1:
        del model  # each worker loads its own; this one only proved that it loads
        model = None
    counts = predict_corpus(
        records,
        spec,
        output,
        model=model,
        source=source,
        on_error=args.on_error,
        workers=args.workers,
        chunk_size=args.chunk_size,
        progress=progress,
    )
    if args.output:
        listed = f", listed in {skipped}" if counts.skipped else ""
        print(
            f"predicted {counts.predicted:,} records into {args.output} ({counts.skipped:,} "
            f"skipped{listed}; {progress.rate:,.0f} records/s)",
            file=sys.stderr,
        )
    return 0


def predict_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of ``predict`` a user asked for, as ``Model.predict`` keywords."""
    options: dict[str, Any] = {"attention": True} if args.attention else {}
    if args.min_confidence is not None:
        options["min_confidence"] = args.min_confidence
    if args.top_k != 1:
        if args.top_k < 1:
            raise ConfigError(f"--top-k must be >= 1, got {args.top_k}")
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
