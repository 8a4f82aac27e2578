"""A run's metrics: ``metrics.csv``, one row per validation, and TensorBoard's event file
where TensorBoard is installed."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Protocol

from bistack.files.leftovers import leftover_name
from bistack.runs.tensorboard import ScalarEvents
from bistack.runs.tensorboard import installed as tensorboard_installed
from bistack.runs.tensorboard import keep_until as keep_events_until


class WritesSomewhere(Protocol):
    """A run, as its metrics see it: the folder that holds its files now (staging, until its
    first best model; then its output)."""

    @property
    def output(self) -> Path: ...


class MetricsLog:
    """metrics.csv, one row per epoch, plus a TensorBoard event file when TensorBoard is
    installed (``bistack.runs.tensorboard``); both in the run's folder of the moment (staging,
    then the output)."""

    def __init__(self, run: WritesSomewhere) -> None:
        self.run = run
        run.output.mkdir(parents=True, exist_ok=True)
        self.events = ScalarEvents() if tensorboard_installed() else None

    def keep_until(self, epoch: int, step: int) -> None:
        """Drop the rows after ``epoch`` (a resumed run computes them again), and TensorBoard's
        after ``step`` (the epoch's, or its last optimizer step's)."""
        path = self.run.output / "metrics.csv"
        if path.exists():
            lines = path.read_text().splitlines(keepends=True)
            rows = [line for line in lines[1:] if int(line.split(",")[0]) <= epoch]
            temporary = path.with_name(leftover_name(path.name, "tmp"))
            temporary.write_text("".join(lines[:1] + rows))
            temporary.replace(path)
        if self.events is not None:
            keep_events_until(self.run.output, step)

    def write(self, row: dict[str, float], step: int) -> None:
        """Append ``row``; TensorBoard draws it at ``step`` (its epoch, or with
        ``train.eval_every`` its optimizer step)."""
        path = self.run.output / "metrics.csv"
        new = not path.exists()
        with path.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)
        if self.events is not None:
            scalars = {key: value for key, value in row.items() if key not in ("epoch", "step")}
            self.events.write(self.run.output, scalars, step)
