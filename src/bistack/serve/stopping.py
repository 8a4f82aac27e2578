"""A uvicorn server that SIGTERM stops cleanly at any point of its life.

uvicorn hears SIGTERM and Ctrl-C only while it runs, and a server asked to exit before it has
started skips its serving loop, dropping what queued on its listening socket. So bistack hears
them from the moment the port listens: heard before uvicorn has started (while a model loads,
or in the moment before uvicorn's handlers are in place), a signal is only marked, and once
uvicorn serves it answers what queued for ``DRAIN_SECONDS``, then stops; heard later, uvicorn
drains as it does, then raises the signal again here, where it is marked too.
"""

from __future__ import annotations

import signal
import socket
import threading
from typing import Any

# A server stopped before it served answers for this long what queued meanwhile, then stops.
DRAIN_SECONDS = 1.0


class Stopping:
    """The ``signals`` heard (``heard``), from :meth:`listen` until the process ends."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        self.signals = signals
        self.heard: list[int] = []
        self.server: Any = None  # the uvicorn server, once built
        self.ended = threading.Event()

    def listen(self) -> None:
        for sig in self.signals:
            signal.signal(sig, self.hear)

    def hear(self, sig: int, _: Any) -> None:
        self.heard.append(sig)
        if self.server is not None and self.server.started:
            self.server.should_exit = True

    def run(self, server: Any, sock: socket.socket) -> None:
        """``server.run`` on ``sock``, stopped after a drain where a signal came before it
        started."""
        self.server = server
        threading.Thread(target=self.drain, daemon=True, name="bistack-drain").start()
        try:
            server.run(sockets=[sock])
        finally:
            self.ended.set()

    def drain(self) -> None:
        while not self.server.started and not self.ended.wait(0.05):
            pass
        if self.heard and not self.ended.wait(DRAIN_SECONDS):
            self.server.should_exit = True
