"""Runs repeated over seeds or folds (the ladder, compare-poolers): their results, and reuse of
finished runs so that an interrupted comparison resumes where it stopped."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.config import AnyConfig, same_settings
from bistack.modeldir import write_json

RECORD = "result.json"


@dataclass(frozen=True)
class RepeatedResult:
    """One row of a comparison: a score per seed or fold."""

    name: str
    scores: list[float]
    parameters: int
    seconds: float  # mean wall time of one run

    @property
    def mean(self) -> float:
        return statistics.fmean(self.scores)

    @property
    def std(self) -> float:
        return statistics.stdev(self.scores) if len(self.scores) > 1 else 0.0


def run_or_reuse(
    directory: Path, config: AnyConfig, run: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """``directory/result.json`` if a run with the same settings finished there; otherwise
    ``run()``'s result, recorded with the settings (keys ``score``, ``seconds``, ...)."""
    record = directory / RECORD
    if record.is_file():
        previous = json.loads(record.read_text())
        if same_settings(previous.get("config", {}), config):
            return previous
    result = {"config": config.to_dict(), **run()}
    write_json(record, result)
    return result
