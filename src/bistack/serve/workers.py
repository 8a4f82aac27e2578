"""``bistack serve --workers N``: N model processes behind one port, sharing the connections.

Each worker listens on a socket of its own, bound to the same port with SO_REUSEPORT, so the
kernel spreads new connections over the workers (by the connection's addresses). A single
listening socket shared by every worker, as uvicorn's process supervisor shares it, let whichever
worker woke first accept every connection then waiting: under 32 keep-alive clients one of two
workers answered all 4,577 requests and the other none, so a second worker added nothing.

The parent holds the port (bound, not listening: no connection may wait where no worker accepts
it) and starts the workers, spawned rather than forked (a fork of a process that has run torch
inherits its thread pools' locks). Each listens at once, then loads its model with its own
threads, so connections made meanwhile wait in its backlog; the parent says where it serves
once every worker listens. It then watches them: a worker that dies is started again (its
live gauges taken out of the shared metrics), one that dies before it serves stops the server
with an error. SIGTERM or Ctrl-C is passed on to every worker, each drains as ``bistack serve``
does alone, and the parent returns once all have.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

from prometheus_client.multiprocess import mark_process_dead

from bistack.errors import BistackError
from bistack.serve.app import create_app
from bistack.serve.served import served_from
from bistack.serve.settings import ServeSettings
from bistack.serve.sockets import BACKLOG, port_socket
from bistack.serve.stopping import Stopping
from bistack.serve.telemetry import log_access
from bistack.system.processes import die_with

SPAWN = multiprocessing.get_context("spawn")


def held_port(host: str, port: int) -> socket.socket:
    """The port the workers will share, bound for them (``port`` 0: a free one). It is first
    bound alone: a port that anything holds, another server's workers included (they would
    otherwise share their connections with ours), is refused here."""
    with port_socket(host, port) as alone:
        port = alone.getsockname()[1]
    return port_socket(host, port, shared=True)


def worker_app(settings: ServeSettings) -> Any:
    """The app of one worker process: the model ``settings`` names, with its threads and
    limits, each request logged when they say so."""
    if settings.access_log:
        log_access()
    served = served_from(settings)
    return create_app(served, settings.limits, shared_metrics=True)


def run_worker(settings: ServeSettings, host: str, port: int, says: Connection) -> None:
    """One worker process: listen, say so, load the model, say so, serve until SIGTERM; it
    ends with its supervisor, however that ends (a ``kill -9`` of it left workers holding the
    port under PID 1)."""
    import uvicorn

    die_with(os.getppid())

    stopping = Stopping((signal.SIGTERM, signal.SIGINT))
    stopping.listen()  # heard while the model loads: it stops once it has answered what queued
    sock = port_socket(host, port, shared=True)
    sock.listen(BACKLOG)
    says.send("listening")
    app = worker_app(settings)  # OMP_NUM_THREADS, set by the command line, came with the spawn
    says.send("serving")
    says.close()
    stopping.run(uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)), sock)
    # Every response is sent and the app has shut down: nothing is left to do, and a thread a
    # library left behind must not keep a stopped worker (and its supervisor) alive.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@dataclass
class Worker:
    process: BaseProcess
    says: Connection | None  # what it says until it serves: "listening", then "serving"
    serving: bool = False

    def heard(self) -> str | None:
        """What it said next; None once it has stopped saying (its end of the pipe closed)."""
        assert self.says is not None
        try:
            word = self.says.recv()
        except EOFError:
            word = None
        if word in (None, "serving"):
            self.says.close()
            self.says = None
            self.serving = word == "serving"
        return word

    def died(self, when: str) -> str:
        self.process.join()
        return f"a serve worker process ended {when} (exit code {self.process.exitcode})"


def serve_workers(
    host: str,
    port: int,
    workers: int,
    settings: ServeSettings,
    announce: Callable[[tuple[str, int]], None],
) -> None:
    """Serve from ``workers`` processes on ``host:port`` until SIGTERM or Ctrl-C; ``announce``
    hears the address once every worker listens."""
    held = held_port(host, port)
    where = held.getsockname()[:2]
    stopping = False

    def start() -> Worker:
        ours, theirs = SPAWN.Pipe(duplex=False)
        process = SPAWN.Process(target=run_worker, args=(settings, where[0], where[1], theirs))
        process.start()
        theirs.close()  # the worker holds the only writing end: its exit ends the pipe
        return Worker(process, ours)

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True
        for worker in running:
            if worker.process.is_alive() and worker.process.pid is not None:
                os.kill(worker.process.pid, signal.SIGTERM)

    running: list[Worker] = []
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        while len(running) < workers and not stopping:
            running.append(start())
        if stopping:  # a signal while the last one started: that one hears it too
            stop()
        for worker in running:
            if worker.heard() != "listening" and not stopping:
                raise BistackError(worker.died("before it listened"))
        if not stopping:
            announce(where)
        while running:
            listened = [w.says for w in running if w.says is not None]
            ended = wait([*(w.process.sentinel for w in running), *listened], 1.0)
            for worker in list(running):
                if worker.says is not None and worker.says in ended:
                    worker.heard()
                if worker.process.sentinel not in ended:
                    continue
                worker.process.join()
                mark_process_dead(worker.process.pid)  # its queue depth is no longer live
                running.remove(worker)
                if stopping:
                    continue
                if not worker.serving:
                    raise BistackError(worker.died("before it served"))
                running.append(start())  # died while serving: another takes its place
    finally:
        stop()
        for worker in running:
            worker.process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        held.close()
