"""Where corpus prediction writes: its output and the skipped-records file, appended a chunk at
a time, so that a run killed at any point (SIGKILL included) can be resumed.

After each chunk, ``OUTPUT.progress.json`` records how many input records are done and how
many bytes of each file are whole (it is written to a temporary name and renamed, so it is
itself never half-written). ``--resume`` cuts both files back to those sizes (a record
written after the last progress record, or half-written, goes) and skips the records done:
nothing is written twice, nothing is lost. A run stopped before it wrote anything resumes
from the beginning, and leaves no file behind (no empty output: :meth:`FileOutput.stop`). The
progress file is removed when the run ends.

A run that replaces an output (``--overwrite`` onto a file that exists) writes beside it, under
a hidden name in the same folder (``.NAME.bistack-new``, with its own progress record), and renames
the new file over the old one when it has finished: until then the old output stays byte for
byte, whatever stops the run (a bad first record, an interrupt, a kill), and ``--resume``
goes on with the hidden file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from bistack.errors import ConfigError
from bistack.files.leftovers import leftover_name, leftover_pattern

PROGRESS_SUFFIX = ".progress.json"
# Settings that are digests of content (``bistack.files.fingerprints``): what changed, in words.
CONTENT = {"model_content": "the model", "input_content": "the input"}


class StdoutOutput:
    """Predictions to stdout, as they come (a pipe sees each chunk at once); no resume."""

    records_done = 0

    def __init__(self, skipped: Path | None) -> None:
        self.skipped = skipped
        self._skipped: TextIO | None = None
        if skipped is not None:
            self._skipped = skipped.open("w", encoding="utf-8")

    def begin(self, head: str) -> None:
        """The output's first line (a table's columns), before any prediction."""
        sys.stdout.write(head)

    def write(self, predictions: str, skipped: str, records: int) -> None:
        sys.stdout.write(predictions)
        sys.stdout.flush()
        if skipped and self._skipped is not None:
            self._skipped.write(skipped)
            self._skipped.flush()

    def finish(self) -> None:
        if self._skipped is not None:
            self._skipped.close()

    def stop(self) -> None:
        """The run stopped early (a bad record, an interrupt): what it wrote stays."""
        self.finish()


class FileOutput:
    """Predictions appended to ``path`` and skipped records to ``skipped``, with the progress
    record that makes the run resumable (see the module's docstring)."""

    def __init__(
        self, path: Path, skipped: Path, settings: dict[str, Any], resume: bool, overwrite: bool
    ) -> None:
        if path.is_symlink():  # written in the link's target; the link stays
            path = Path(os.path.realpath(path))
        self.path, self.skipped = path, skipped
        self.settings = settings
        if path.is_dir():
            raise ConfigError(f"--output {path} is a folder; give a file name")
        unfinished = [p for p in (replacement(path), path) if progress_of(p).exists()]
        if resume and not unfinished and not path.exists():
            resume = False  # stopped before it wrote anything: it starts from the beginning
        if resume:
            if not unfinished:
                raise ConfigError(
                    f"--resume: {progress_of(path)} does not exist, so there is no unfinished "
                    f"run to continue ({path} is finished, or was never started)"
                )
            self.replacing = unfinished[0] != path
        elif unfinished and not overwrite:
            raise ConfigError(
                f"{path} is an unfinished run ({progress_of(unfinished[0])} says how far it "
                "got): add --resume to continue it, or --overwrite to start again"
            )
        elif path.exists() and not overwrite:
            raise ConfigError(f"{path} exists: add --overwrite to replace it")
        else:  # the old output, if any, stays until this run has finished
            self.replacing = path.exists()
        self.working = replacement(path) if self.replacing else path
        self.working_skipped = replacement(skipped) if self.replacing else skipped
        self.progress = progress_of(self.working)
        self.records_done, sizes = self._resumed() if resume else (0, (0, 0))
        self.fresh = not resume  # this run made the files: it may take them back (``stop``)
        if not resume:  # the progress record first: an output never exists without one
            self._save_progress(0, 0)
        self._out = _opened(self.working, sizes[0])
        self._skipped = _opened(self.working_skipped, sizes[1])

    def _resumed(self) -> tuple[int, tuple[int, int]]:
        try:
            state = json.loads(self.progress.read_text(encoding="utf-8"))
            done, sizes = int(state["records"]), (int(state["bytes"]), int(state["skipped_bytes"]))
            settings = state["settings"]
        except (ValueError, KeyError, TypeError) as error:
            raise ConfigError(f"{self.progress}: not a progress record ({error})") from None
        changed = sorted(
            k for k in {*settings, *self.settings} if settings.get(k) != self.settings.get(k)
        )
        edited = [k for k in changed if k in CONTENT and settings.get(k) is not None]
        if edited:
            what = " and ".join(
                f"{CONTENT[k]} {self.settings.get(k.removesuffix('_content'))}" for k in edited
            )
            raise ConfigError(
                f"--resume: {what} changed since {self.path} was started (its content differs): "
                "resuming would mix predictions of two; restore it, or start again with "
                "--overwrite"
            )
        changed = [k for k in changed if k not in CONTENT]
        if changed:
            was = ", ".join(
                f"{k}: {settings.get(k)!r} then, {self.settings.get(k)!r} now" for k in changed
            )
            raise ConfigError(
                f"--resume: {self.path} was started with other settings ({was}); resume with "
                "the same ones, or start again with --overwrite"
            )
        for file, size in ((self.working, sizes[0]), (self.working_skipped, sizes[1])):
            have = file.stat().st_size if file.exists() else 0
            if have < size:
                raise ConfigError(
                    f"--resume: {file} has {have} bytes, fewer than the {size} its progress "
                    "record counts; it was changed since: start again with --overwrite"
                )
        return done, sizes

    def begin(self, head: str) -> None:
        """The output's first line (a table's columns), written by the run that made the file
        (a resumed run has it already) and counted as whole in the progress record."""
        if self.fresh and head and self._out.tell() == 0:
            self._out.write(head.encode("utf-8"))
            self._out.flush()
            self._save_progress(self._out.tell(), self._skipped.tell())

    def write(self, predictions: str, skipped: str, records: int) -> None:
        """Append one chunk's predictions and skipped records (``records`` input records in
        all), then record the progress."""
        self._out.write(predictions.encode("utf-8"))
        self._out.flush()
        if skipped:
            self._skipped.write(skipped.encode("utf-8"))
            self._skipped.flush()
        self.records_done += records
        self._save_progress(self._out.tell(), self._skipped.tell())

    def _save_progress(self, whole: int, skipped_whole: int) -> None:
        state = {
            "records": self.records_done,
            "bytes": whole,
            "skipped_bytes": skipped_whole,
            "settings": self.settings,
        }
        temporary = self.progress.with_name(leftover_name(self.progress.name, "tmp", os.getpid()))
        temporary.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, self.progress)

    def finish(self) -> None:
        """Close the files and put them in place (a replaced output only now); an empty
        skipped-records file is removed, and so is the progress record (the output is
        complete), with any a killed run left half-written."""
        self._out.close()
        self._skipped.close()
        if self.replacing:
            os.replace(self.working, self.path)
        if self.working_skipped.stat().st_size == 0:
            self.working_skipped.unlink()
            if self.replacing:  # the replaced output's list goes with it
                self.skipped.unlink(missing_ok=True)
        elif self.replacing:
            os.replace(self.working_skipped, self.skipped)
        for progress in (self.progress, progress_of(self.path)):
            progress.unlink(missing_ok=True)  # a replaced unfinished run's too
            for leftover in progress.parent.glob(leftover_pattern(progress.name, "tmp")):
                leftover.unlink()  # a progress record a killed run was writing

    def stop(self) -> None:
        """The run stopped early (a record that failed with ``--on-error stop``, an
        interrupt): its files are kept for ``--resume``, unless it wrote nothing, when the
        files it made (an empty output, skipped-records file and progress record) go. An
        output it was to replace is never touched."""
        self._out.close()
        self._skipped.close()
        if self.fresh and self.records_done == 0:
            for made in (self.working, self.working_skipped, self.progress):
                made.unlink(missing_ok=True)


def replacement(path: Path) -> Path:
    """Where a run replacing ``path`` writes until it has finished: a hidden name beside it."""
    return path.with_name(leftover_name(path.name, "new"))


def progress_of(path: Path) -> Path:
    """The progress record of the output file written at ``path``."""
    return path.with_name(path.name + PROGRESS_SUFFIX)


def _opened(path: Path, size: int) -> Any:
    """``path`` opened for appending after its first ``size`` bytes (what follows is cut)."""
    handle = open(path, "r+b" if path.exists() else "w+b")  # noqa: SIM115 - closed in finish
    handle.truncate(size)
    handle.seek(size)
    return handle
