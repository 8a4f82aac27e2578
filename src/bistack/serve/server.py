"""``bistack serve``: bind the port, then run the app on uvicorn over that socket (in this
process, or in ``--workers`` processes), or on Ray Serve's replicas, as :func:`launch` chooses
from the settings, until Ctrl-C or SIGTERM. On SIGTERM it stops accepting,
answers every request already accepted, and exits 0: uvicorn's graceful shutdown lets the
connections finish before the app's shutdown stops the batcher."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from bistack.errors import ConfigError, needs_extra
from bistack.serve.app import create_app
from bistack.serve.served import ServedModel, checked_apart, served_from
from bistack.serve.settings import Limits, ServeSettings
from bistack.serve.sockets import listening_socket
from bistack.serve.stopping import Stopping
from bistack.serve.telemetry import log_access


def launch(settings: ServeSettings) -> None:
    """Serve as ``settings`` say: one worker here serves in this process (a model that does
    not load stops before the port is bound); several workers, or Ray Serve's replicas, each
    open their own copy, after a process that exits has checked that the model loads. The
    process's environment is the command line's to set (``bistack.cli.serve``)."""
    if settings.ray:
        try:
            import ray.serve  # noqa: F401 (only whether it is there)
        except ImportError as error:
            raise ConfigError(needs_extra("serving on Ray", "ray-serve", error)) from None
    workers = settings.processes(len(os.sched_getaffinity(0)))
    where = (settings.host, settings.port, settings.limits, settings.model)
    if not settings.ray and workers == 1:
        serve(served_from(settings), *where, settings.access_log)
        return
    description = checked_apart(settings)
    if settings.ray:
        serve_on_ray(description, *where, settings.replicas, settings.threads)
    else:  # the workers count together in the folder PROMETHEUS_MULTIPROC_DIR names
        serve_in_workers(description, workers, settings)


def serve(
    served: ServedModel, host: str, port: int, limits: Limits, model: str, access_log: bool
) -> None:
    """Serve ``served`` (opened from ``model``) in this process on ``host:port`` until stopped."""
    import uvicorn

    # SIGTERM heard from before the port is announced, so a drained server exits 0 rather than
    # dying of the signal, and one heard before uvicorn starts still answers what queued.
    stopping = Stopping()
    stopping.listen()
    sock = listening_socket(host, port)
    announce(sock.getsockname()[:2], served.description, model, "")
    if access_log:
        log_access()
    config = uvicorn.Config(create_app(served, limits), log_level="warning", access_log=False)
    stopping.run(uvicorn.Server(config), sock)
    if stopping.heard:
        print("stopped on SIGTERM: every request accepted was answered", file=sys.stderr)


def serve_in_workers(description: str, workers: int, settings: ServeSettings) -> None:
    """Serve the model ``settings`` names from ``workers`` processes on its host and port,
    each with its threads (``bistack.serve.workers``)."""
    from bistack.serve.workers import serve_workers

    threads = settings.threads
    each = f"{threads} thread{'s' if threads != 1 else ''} each"
    processes = f", {workers} worker processes of {each}"
    serve_workers(
        settings.host,
        settings.port,
        workers,
        settings,
        lambda where: announce(where, description, settings.model, processes),
    )
    # SIGTERM and Ctrl-C reach every worker, and each drains.
    print("stopped: every request accepted was answered", file=sys.stderr)


def announce(where: tuple[str, int], description: str, model: str, processes: str) -> None:
    """Say on stdout where the server answers (its first line, which scripts read)."""
    host, port = where
    shown_host = f"[{host}]" if ":" in host else host
    print(
        f"serving {description} from {model} on http://{shown_host}:{port}{processes} "
        "(the page at /, the API docs at /docs); Ctrl-C or SIGTERM stops",
        flush=True,
    )


def serve_on_ray(
    description: str,
    host: str,
    port: int,
    limits: Limits,
    model: str,
    replicas: int,
    threads: int,
) -> None:
    """Serve ``model`` from ``replicas`` Ray Serve replicas behind Ray's HTTP proxy on
    ``host:port``: the cluster ``RAY_ADDRESS`` names, else a Ray started here for the purpose
    (and stopped with the server)."""
    import ray
    from ray import serve as ray_serve

    from bistack.serve.ray import deployment

    if port == 0:  # Ray's proxy takes a port number; choose a free one as the OS would
        with listening_socket(host, 0) as probe:
            port = probe.getsockname()[1]
    else:
        listening_socket(host, port).close()  # a port that is taken: the clear error, now
    # The cluster RAY_ADDRESS names, else a new local one.
    ray.init(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        ray_serve.start(http_options={"host": host, "port": port})
        ray_serve.run(
            deployment(model, replicas, threads, limits), name="bistack", route_prefix="/"
        )
        announce((host, port), description, model, f", {replicas} Ray Serve replicas")
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
        ray_serve.shutdown()  # replicas finish the requests they hold, then go (Ray's own)
    finally:
        ray.shutdown()
    print("stopped", file=sys.stderr)
