"""Which CRF algorithm a device runs: the parallel scan (``bistack.kernels.crf_scan``: a few
launches a level, ``batch × T × num_tags³`` work) or the field's loop over positions (a few
launches a position, ``batch × T × num_tags²`` work), by a table a GPU run of
``benchmarks/gpu.py`` fills from its CRF-only rows (``crf_choice.json`` beside this file).

The table records, for each stage, each measured tag count and which of the two won there, at
the batch size the rows used. The scan's work grows as K³ and the loop's as K², so the scan
wins at few tags (its few launches) and the loop from some count up. A CRF of K tags takes the
winner at the largest measured count no greater than K (below every measured count: the
smallest's). Until a run fills it (no counts), the scan everywhere. The CPU runs neither: its
compiled kernels are faster.
"""

from __future__ import annotations

import bisect
import functools
import json
from pathlib import Path
from typing import Literal

Stage = Literal["train", "decode"]  # the loss's forward and backward; the best path
Winner = Literal["scan", "loop"]
TABLE_FILE = Path(__file__).with_name("crf_choice.json")


@functools.cache
def table() -> dict:
    """The shipped table: ``measured_on`` (the device that filled it), ``batch`` (the
    sentences a row's batch held) and ``winners`` (by stage, each measured tag count's winner,
    ``{"17": "scan", "73": "loop"}``; empty: none measured)."""
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))


def winner(stage: Stage, num_tags: int) -> Winner:
    """Which algorithm a CRF of ``num_tags`` tags runs ``stage`` with on a device: the winner at
    the largest measured count no greater than it, or the smallest's below them all; the scan
    where nothing was measured."""
    measured = {int(tags): won for tags, won in table()["winners"][stage].items()}
    if not measured:
        return "scan"
    counts = sorted(measured)
    at = bisect.bisect_right(counts, num_tags) - 1
    chosen: Winner = measured[counts[max(at, 0)]]
    return chosen


def takes_loop(stage: Stage, num_tags: int) -> bool:
    """Whether a CRF of ``num_tags`` tags runs ``stage`` as a loop over positions on a device."""
    return winner(stage, num_tags) == "loop"
