"""What this machine runs natively, as the configs' ``auto`` settings ask it; torch-free to
import (a config is read before any model loads)."""

from __future__ import annotations

import re
import sys
from pathlib import Path


def native_bfloat16() -> bool:
    """Whether this machine runs bfloat16 matrix products natively: a CPU with AVX-512 BF16 or
    AMX (Linux's ``/proc/cpuinfo`` flags), or a CUDA GPU with bfloat16."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        flags = ""
    if re.search(r"\b(avx512_bf16|amx_bf16)\b", flags):
        return True
    torch = sys.modules.get("torch")  # a run's process has it; reading a config needs none
    return torch is not None and bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
