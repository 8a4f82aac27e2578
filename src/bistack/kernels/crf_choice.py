"""Which CRF algorithm a device runs: the parallel scan (``bistack.kernels.crf_scan``: a few
launches a level, ``batch × T × num_tags³`` work) or the field's loop over positions (a few
launches a position, ``batch × T × num_tags²`` work), by a table a GPU run of
``benchmarks/gpu.py`` fills from its CRF-only rows (``crf_choice.json`` beside this file): at
``num_tags`` no more than ``loop_up_to_tags[stage]`` the loop, else the scan. Until a run fills
it (``null``), the scan everywhere. The CPU runs neither: its compiled kernels are faster.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Literal

Stage = Literal["train", "decode"]  # the loss's forward and backward; the best path
TABLE_FILE = Path(__file__).with_name("crf_choice.json")


@functools.cache
def table() -> dict:
    """The shipped table: ``measured_on`` (the device that filled it) and ``loop_up_to_tags``
    (by stage: the most tags at which the loop beat the scan there, or null)."""
    return json.loads(TABLE_FILE.read_text(encoding="utf-8"))


def takes_loop(stage: Stage, num_tags: int) -> bool:
    """Whether a CRF of ``num_tags`` tags runs ``stage`` as a loop over positions on a device."""
    most = table()["loop_up_to_tags"][stage]
    return most is not None and num_tags <= most
