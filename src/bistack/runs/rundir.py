"""A run's output directory is replaced whole or not at all, and by one run at a time.

A run writes its model (config, vocabularies, weights) and metrics.csv into a staging directory
beside the output (``.NAME.bistack-staging-PID``). When its first best model is saved, the
staged model directory is swapped in with one atomic rename (Linux's ``renameat2`` exchange
when a model is already there), then metrics.csv is renamed over the old one. Until that moment
the output is untouched, byte for byte: a run that fails a data check, diverges, or is
interrupted or killed before it has a model leaves the previous model exactly as it was. A lock
beside the output (``.NAME.bistack-lock``, an ``flock`` the kernel releases when its holder
dies, so a killed run's lock is never stale) keeps a second run out.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from bistack.errors import BistackError
from bistack.files.claim import Layout, refuse_foreign, staged
from bistack.files.leftovers import leftover_name, leftover_pattern
from bistack.files.modeldir import model_layout
from bistack.files.paths import refuse_shared_folder
from bistack.files.swap import alive, exchange, restore_parked

MODEL = "model"
METRICS = "metrics.csv"
LOG = "train.log"  # every line the run printed, on a terminal or not
# The replaced run's files beside its model: gone with it, whether or not this run has its own.
STALE_WHEN_REPLACED = (
    METRICS,
    "dev_metrics.json",
    "tensorboard",
    "checkpoint.safetensors",
    LOG,
)


class OutputError(BistackError):
    """An output directory that cannot take this run (in use, holds a model, not a folder)."""


def run_layout(name: str) -> Layout | bool | None:
    """A run's output folder (see ``bistack.files.claim``): the model and the files replaced
    with it are bistack's, the rest the user's, left beside them."""
    if name == MODEL:
        return model_layout
    if name == "tensorboard":
        return lambda entry: entry.startswith("events.out.tfevents.") or staged(entry)
    return True if name in STALE_WHEN_REPLACED else None


def beside_no_model(name: str) -> bool | None:
    """An output folder without a model holds no earlier run's files: a ``train.log`` or
    ``metrics.csv`` there is the user's, and a run would write its own over it."""
    return False if name in STALE_WHEN_REPLACED else None


def check_output(output: Path, overwrite: bool) -> None:
    """Refuse an output that is a file, that another run is writing (said first: a running
    run's model is no reason to overwrite it), or that holds a model unless ``overwrite``."""
    if output.exists() and not output.is_dir():
        raise OutputError(f"{output}: --output must be a folder, and this is a file")
    refuse_shared_folder(output, "--output")
    refuse_if_in_use(output)
    if (output / MODEL).exists() and not overwrite:
        raise OutputError(
            f"{output} already holds a model; give --overwrite to replace it (the old one stays "
            "until the new run has its first best model), or choose another --output"
        )
    if (output / MODEL).exists():  # a run replaces the model whole, its run's files beside it
        refuse_foreign(
            output,
            run_layout,
            "--output",
            "a new run replaces the model folder and the earlier run's files whole, so they "
            "would be lost",
        )
    else:
        refuse_foreign(
            output,
            beside_no_model,
            "--output",
            "a run writes its own files of those names there, so they would be lost",
        )
    foreign = (
        []
        if not output.is_dir()
        else sorted(
            entry.name
            for entry in output.iterdir()
            if entry.name not in (MODEL, *STALE_WHEN_REPLACED)
        )
    )
    if foreign and not (output / MODEL).exists() and not overwrite:
        raise OutputError(
            f"{output} holds files of its own ({', '.join(foreign[:3])}) and no model: a run "
            "writes its model beside them (deleting none of them) only with --overwrite; or "
            "choose a new or empty --output"
        )


class RunDirectory:
    """Where a run writes: the staging directory until :meth:`commit`, the output after."""

    def __init__(self, output: Path, staging: Path | None, lock: IO[str] | None) -> None:
        self.output = output
        self.staging = staging
        self.lock = lock
        self.committed = staging is None
        self.notes: list[str] = []  # things worth telling the user (a cleared stale lock)

    @classmethod
    def open(cls, output: Path, overwrite: bool) -> RunDirectory:
        """Lock ``output``, clear what killed runs left beside it, and start staging."""
        check_output(output, overwrite)
        output.parent.mkdir(parents=True, exist_ok=True)
        directory = cls._locked(output)
        directory.staging = output.parent / leftover_name(output.name, "staging", os.getpid())
        directory.staging.mkdir()
        directory.committed = False
        return directory

    @classmethod
    def resume(cls, output: Path) -> RunDirectory:
        """Lock ``output`` to go on with the run whose checkpoint it holds: that run committed
        its first best model there, so this one writes there directly, without staging."""
        return cls._locked(output)

    @classmethod
    def _locked(cls, output: Path) -> RunDirectory:
        """``output`` locked for this run, with what killed runs left beside it cleared."""
        lock, previous = _lock(output)
        directory = cls(output, None, lock)
        restored = restore_parked(output / MODEL)
        if restored is not None:
            directory.notes.append(restored)
        if previous is not None and not alive(previous.get("pid")):
            directory.notes.append(
                f"cleared a stale lock of a run that no longer runs (pid {previous.get('pid')}, "
                f"started {previous.get('started')})"
            )
        for leftover in output.parent.glob(leftover_pattern(output.name, "staging")):
            shutil.rmtree(leftover, ignore_errors=True)  # ours to clear: we hold the lock
        return directory

    @classmethod
    def follower(cls, output: Path) -> RunDirectory:
        """What a process other than rank 0 sees: it writes nothing."""
        return cls(output, None, None)

    @property
    def root(self) -> Path:
        """The folder that holds this run's files now."""
        return self.output if self.committed or self.staging is None else self.staging

    @property
    def model_dir(self) -> Path:
        return self.root / MODEL

    def log(self, text: str) -> None:
        """Append what the run printed to its ``train.log`` (beside its metrics: staged until
        the first best model, then in the output; a resumed run's lines follow the first's).
        A process other than rank 0 keeps none."""
        if self.lock is None:
            return
        with (self.root / LOG).open("a", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")

    def commit(self) -> None:
        """Swap the staged model (with its first best weights) into the output in one atomic
        rename, then move the run's other files (metrics.csv, ...) over the old ones."""
        if self.committed or self.staging is None:
            return
        self.output.mkdir(parents=True, exist_ok=True)
        target = self.output / MODEL
        if target.exists():
            exchange(self.staging / MODEL, target)  # the old model now sits in staging
        else:
            os.rename(self.staging / MODEL, target)
        for name in STALE_WHEN_REPLACED:
            stale = self.output / name
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            elif not (self.staging / name).exists():  # else replaced atomically below
                stale.unlink(missing_ok=True)
        for entry in self.staging.iterdir():
            if entry.name == MODEL:
                continue
            if entry.is_dir():
                shutil.rmtree(self.output / entry.name, ignore_errors=True)
                os.rename(entry, self.output / entry.name)
            else:
                os.replace(entry, self.output / entry.name)
        self.committed = True

    def close(self) -> None:
        """Remove the staging directory (an unfinished model, or the replaced one) and unlock."""
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
        if self.lock is not None:
            self.lock.truncate(0)  # a finished run leaves no holder behind, a killed one does
            self.lock.close()  # releases the flock
            self.lock = None


def refuse_if_in_use(output: Path, advice: str = "choose another --output") -> None:
    """Refuse ``output`` while another run holds its lock (a shared lock, taken and let go:
    nothing of this run's is written), with ``advice`` on what to do instead."""
    path = lock_path(output)
    if not path.exists():
        return
    with open(path, encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(output, handle, advice=advice) from None


def _in_use(
    output: Path,
    handle: IO[str],
    what: str = "training run",
    advice: str = "choose another --output",
) -> OutputError:
    holder = _read_holder(handle)
    pids = lock_holders(Path(handle.name)) or [holder.get("pid", "?")]
    started = f", started {holder['started']}" if "started" in holder else ""
    return OutputError(
        f"{output} is in use by another {what} (pid {', '.join(map(str, pids))}{started}); "
        f"wait for it to finish, or {advice}"
    )


def lock_holders(path: Path) -> list[int]:
    """The processes holding the ``flock`` on ``path``, as Linux's ``/proc/locks`` lists them
    (a shared lock has several; empty where that file cannot be read)."""
    try:
        status = path.stat()
        table = Path("/proc/locks").read_text(encoding="ascii")
    except OSError:
        return []
    device = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    pids = []
    for line in table.splitlines():
        fields = line.split()
        if "->" not in fields and len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == device:
            pids.append(int(fields[4]))
    return sorted(set(pids))


@contextmanager
def output_lock(output: Path, what: str, wait: bool = False, lock: str = "lock") -> Iterator[None]:
    """``.NAME.bistack-lock`` beside ``output`` held for the block, as a training run holds
    its own (a ``what``, such as a cross-validation, holding it already: OutputError naming
    it, or with ``wait``, the block waits for it). ``lock``: another lock of the output's,
    (processes sharing a CV set it up one at a time under its ``setup`` lock)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    handle, _ = _lock(output, what, wait, lock)
    try:
        yield
    finally:
        handle.truncate(0)  # a finished holder leaves no name behind, a killed one does
        handle.close()


@contextmanager
def shared_lock(output: Path, what: str) -> Iterator[None]:
    """``.NAME.bistack-lock`` beside ``output`` held shared for the block: processes sharing
    one output (a CV's folds trained under ``--runs``) hold it together, and while any does,
    one that would take the output whole (:func:`output_lock`) is refused naming them, as
    they are refused while such a one (a ``what``) holds it."""
    output.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock_path(output), "a+", encoding="utf-8")  # noqa: SIM115 - held for the block
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        error = _in_use(output, handle, what)
        handle.close()
        raise error from None
    try:
        yield
    finally:
        handle.close()


def _lock(
    output: Path, what: str = "training run", wait: bool = False, lock: str = "lock"
) -> tuple[IO[str], dict | None]:
    """Take ``.NAME.bistack-lock`` (or another ``lock`` of the output's) beside ``output``
    (waiting for it with ``wait``); returns it and what its previous holder wrote."""
    path = lock_path(output, lock)
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole run
    try:
        fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        error = _in_use(output, handle, what)
        handle.close()
        raise error from None
    previous = _read_holder(handle) or None
    handle.seek(0)
    handle.truncate()
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    handle.write(json.dumps({"pid": os.getpid(), "started": started}))
    handle.flush()
    return handle, previous


def lock_path(output: Path, lock: str = "lock") -> Path:
    """The lock file beside ``output`` that a run (or a CV) holds while it writes there (or
    another ``lock`` of the output's)."""
    return output.parent / leftover_name(output.name, lock)


def _read_holder(handle: IO[str]) -> dict:
    handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except json.JSONDecodeError:
        return {}
    return holder if isinstance(holder, dict) else {}
