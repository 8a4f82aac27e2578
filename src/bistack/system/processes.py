"""Processes a command starts on its own machine (corpus prediction's workers, a tuner's trial
processes): they end with the command that started them, however it ends."""

from __future__ import annotations

import os
import signal
import threading
import time


def die_with(parent: int) -> None:
    """End this process when ``parent`` does: Linux's parent-death signal where there is one,
    and on every system a thread that watches the parent and exits when it is gone (a
    process whose parent died is handed to another, so its parent id changes)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the thread below does it
        pass
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="bistack-parent-watch").start()
