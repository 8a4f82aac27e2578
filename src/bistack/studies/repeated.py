"""Runs repeated over seeds or folds (the ladder, compare-poolers): their results, and reuse of
finished runs so that an interrupted comparison resumes where it stopped."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bistack.config import ExperimentConfig
from bistack.config.files import same_settings
from bistack.files.modeldir import write_json

RECORD = "result.json"


@dataclass(frozen=True)
class RepeatedResult:
    """One row of a comparison: a score per seed or fold (``runs`` names them)."""

    name: str
    scores: list[float]
    parameters: int
    seconds: float  # mean wall time of one run
    runs: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    @property
    def std(self) -> float:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else 0.0


def finished_run(directory: Path, config: ExperimentConfig) -> dict[str, Any] | None:
    """The record ``directory/result.json`` of a finished run with ``config``'s settings."""
    record = directory / RECORD
    if record.is_file():
        previous = json.loads(record.read_text())
        if same_settings(previous.get("config", {}), config):
            return previous
    return None


def run_or_reuse(
    directory: Path, config: ExperimentConfig, run: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """``directory/result.json`` if a run with the same settings finished there; otherwise
    ``run()``'s result (keys ``score``, ``parameters``, ...), timed (``seconds``) and recorded
    with the settings."""
    previous = finished_run(directory, config)
    if previous is not None:
        return previous
    started = time.monotonic()
    outcome = run()
    result = {"config": config.to_dict(), **outcome, "seconds": time.monotonic() - started}
    write_json(directory / RECORD, result)
    return result
