"""The processes of a search: each running trial names its process (:func:`worker_id`) and
says every ``HEARTBEAT_S`` that it is alive; a trial whose process is gone is reclaimed, its
values tried again (:func:`reclaim_interrupted`); ``--workers`` processes run one study
(:func:`run_workers`)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from bistack.errors import BistackError

SPAWN = multiprocessing.get_context("spawn")
HEARTBEAT_S = 30.0  # how often a running trial says it is alive
STALE_S = 300.0  # a trial of another machine silent this long is taken as interrupted


def worker_id() -> str:
    """This process, as a running trial records it: machine, process id and start time (so a
    reused process id is not taken for the process that died)."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def process_start(pid: int) -> str:
    """When process ``pid`` started (Linux's clock ticks since boot), '' where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


def alive(worker: str) -> bool | None:
    """Whether the process a trial names still runs: known on this machine, None elsewhere."""
    host, _, rest = worker.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not start or process_start(int(pid)) == start


def reclaim_interrupted(study: Any, say: Callable[[str], None]) -> None:
    """Running trials whose process is gone (killed on this machine, or silent on another for
    ``STALE_S``) are recorded as interrupted, and their values tried again."""
    import optuna

    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = trial.user_attrs.get("worker", "")
        running = alive(worker)
        if running is None:
            heard = trial.user_attrs.get("alive_at", trial.datetime_start.timestamp())
            running = time.time() - heard < STALE_S
        if running:
            continue
        try:
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        except (RuntimeError, ValueError):  # another process recorded it first
            continue
        study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
        say(f"trial {trial.number} was interrupted (its process is gone): trying its values again")


@contextlib.contextmanager
def heartbeat(trial: Any) -> Iterator[None]:
    """While a trial runs, record every ``HEARTBEAT_S`` that its process is alive."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            with contextlib.suppress(Exception):  # a busy database: the next beat will do
                trial.set_user_attr("alive_at", time.time())

    thread = threading.Thread(target=beat, daemon=True, name="bistack-trial-heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_workers(
    search: Callable[..., None],
    arguments: Callable[[int], tuple[Any, ...]],
    workers: int,
    say: Callable[[str], None],
) -> None:
    """Run ``search(*arguments(index))`` in ``workers`` spawned processes on one study (spawned,
    as the CV's and the server's workers are: a fork of a process that has run torch inherits
    its thread pools' locks); each ends with this one. Ctrl-C reaches them all (one process
    group): each records its trial."""
    say(f"searching with {workers} worker processes")
    children = [SPAWN.Process(target=search, args=arguments(i)) for i in range(workers)]
    for child in children:
        child.start()
    try:
        for child in children:
            child.join()
    except KeyboardInterrupt:
        for child in children:
            child.join()
        raise
    failed = [child.exitcode for child in children if child.exitcode != 0]
    if failed:
        raise BistackError(
            f"{len(failed)} of {workers} worker processes stopped with an error (exit "
            f"{failed[0]}); their lines above say why; the study keeps every finished trial"
        )
