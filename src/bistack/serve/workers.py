"""``bistack serve --workers N``: N model processes behind one port.

The parent binds the socket and has uvicorn's process supervisor start N workers on it (spawned,
not forked: a fork of a process that has run torch inherits its thread pools' locks); the
kernel hands each new connection to one of them. Each worker opens the model itself with its
own threads and runs the same app as a single process does, its metrics shared with the others.
On SIGTERM the supervisor passes the signal to every worker, each drains as ``bistack serve``
does alone, and the parent returns once all have. A worker that dies is restarted; one that
cannot start stops the server.

A worker's settings reach it in the environment, which spawned processes inherit: the command
line sets them (``bistack.cli.serve_worker`` is the factory each worker calls).
"""

from __future__ import annotations

import socket
from typing import Any

from bistack.serve.app import Limits, create_app
from bistack.serve.served import load_served
from bistack.serve.telemetry import log_access


def worker_app(settings: dict[str, Any]) -> Any:
    """The app of one worker process: ``settings`` has the model, its threads, the limits and
    whether to log each request."""
    if settings["access_log"]:
        log_access()
    served = load_served(settings["model"], settings["threads"])
    return create_app(served, Limits(**settings["limits"]), shared_metrics=True)


def serve_workers(sock: socket.socket, workers: int, factory: str) -> None:
    """Run ``workers`` processes on ``sock``, each serving the app ``factory`` makes, until
    SIGTERM or Ctrl-C."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(
        factory, factory=True, workers=workers, log_level="warning", access_log=False
    )
    Multiprocess(config, sockets=[sock]).run()
