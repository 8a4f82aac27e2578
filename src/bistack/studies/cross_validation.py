"""Deprecated: cross-validation moved to :mod:`bistack.cv` (``bistack.cross_validate`` is
unchanged). The names this module documented still work here, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

MOVED = {
    "cross_validate": "bistack.cv.run",
    "run_cv": "bistack.cv.run",
    "CVResult": "bistack.cv.settings",
    "CVSettings": "bistack.cv.settings",
}


def __getattr__(name: str) -> Any:
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"bistack.studies.cross_validation.{name} moved to {MOVED[name]}.{name}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(MOVED[name]), name)
