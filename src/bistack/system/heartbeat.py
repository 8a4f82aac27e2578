"""Progress a log can read: during a long stage (a frozen backbone's pass over a file, an
epoch), where no bar is drawn (stdout is not a terminal, or ``--no-progress``), a line at a
steady cadence says how far it is, at what rate, and about how long is left; a stage shorter
than the cadence says nothing."""

from __future__ import annotations

import time
from collections.abc import Callable

SECONDS = 30.0  # the cadence: a line at most this often


class Heartbeat:
    """Lines of ``what: N of TOTAL UNIT (RATE/s, about T left)`` through ``say``."""

    def __init__(self, what: str, total: int, unit: str, say: Callable[[str], None]) -> None:
        self.what, self.total, self.unit, self.say = what, total, unit, say
        self.started = self.said = time.monotonic()
        self.done = 0

    def update(self, done: int = 1) -> None:
        """``done`` more units finished; a line when the cadence has passed since the last."""
        self.done += done
        now = time.monotonic()
        if now - self.said < SECONDS:
            return
        self.said = now
        rate = self.done / max(now - self.started, 1e-9)
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        self.say(
            f"{self.what}: {self.done:,} of {self.total:,} {self.unit} ({rate:,.1f}/s, about "
            f"{duration(left)} left)"
        )


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.5 h``: a time left, to the precision it deserves."""
    if seconds == float("inf"):
        return "an unknown time"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
