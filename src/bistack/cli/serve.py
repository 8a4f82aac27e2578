"""``bistack serve``: a model over HTTP with a page to try it (the ``serve`` extra); how it
runs is ``bistack.serve``'s (:func:`bistack.serve.server.launch`)."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from typing import Any

from bistack.cli.flags import (
    Processes,
    add_device,
    add_inference_precision,
    add_matmul_flag,
    add_model,
    add_threads_flag,
    on_device,
    ranged,
)
from bistack.errors import ConfigError, needs_extra
from bistack.serve.settings import DEFAULT_MAX_WORKERS, Limits, ServeSettings


def add(commands: Any) -> None:
    serve = commands.add_parser(
        "serve", help="serve a model over HTTP, with a web page to try it (bistack[serve])"
    )
    add_model(serve)
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
        f"--threads threads (default: one per CPU, at most {DEFAULT_MAX_WORKERS}, "
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
    add_device(serve)
    add_matmul_flag(serve)
    add_inference_precision(serve)
    add_threads_flag(serve, "1: each server process keeps to one core")
    serve.set_defaults(run=run, processes=processes)


def settings_of(args: argparse.Namespace, threads: int = 1) -> ServeSettings:
    """The command line's serve settings (their conflicts refused, before any model loads)."""
    return ServeSettings(
        model=args.model,
        host=args.host,
        port=args.port,
        limits=Limits(max_batch_texts=args.max_batch),
        workers=args.workers,
        ray=args.ray,
        replicas=args.replicas,
        threads=threads,
        access_log=args.access_log,
        device=args.device,
        precision=args.precision,
    )


def processes(args: argparse.Namespace, cpus: int) -> Processes:
    """One thread per server process by default (the CPUs shared by as many processes as
    there are CPUs): a server process uses one core at most (its event loop and its model
    thread share the GIL: 0.98 cores measured under 32 clients), and a second torch thread
    spinning between small kernels takes that core from the event loop
    (benchmarks/results/serve-load.md has the rows)."""
    return Processes(sharing=cpus, running=settings_of(args).processes(cpus))


def run(args: argparse.Namespace) -> int:
    on_device(args.device, args)
    settings = settings_of(args, args.threads)
    try:
        from bistack.serve.server import launch
    except ImportError as error:
        raise ConfigError(needs_extra("serving", "serve", error)) from None
    if settings.ray:
        # Ray Serve gives its HTTP proxy 5 s to say it is ready; on a small machine with busy
        # cores it takes longer, and is killed and restarted, again and again.
        os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
    if settings.ray or settings.processes(len(os.sched_getaffinity(0))) == 1:
        launch(settings)
        return 0
    metrics = tempfile.mkdtemp(prefix="bistack-serve-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics  # where several workers' metrics meet
    try:
        launch(settings)
    finally:
        shutil.rmtree(metrics, ignore_errors=True)
    return 0
