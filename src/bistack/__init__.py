"""bistack: bidirectional and stacked recurrent models for NLP.

``bistack.train(config_or_path, output=..., overrides={...})`` trains a model from Python (it is
:func:`bistack.training.train`, imported on first use so that ``import bistack`` stays light);
``bistack.cross_validate(config_or_path, output, folds=5)`` is ``bistack cv`` from Python;
``bistack.blend([cv_dir, cv_dir], output)`` is ``bistack blend``;
``bistack.api`` loads trained models.
"""

from __future__ import annotations

import importlib
from typing import Any

from bistack._version import __version__ as __version__


def __getattr__(name: str) -> Any:
    if name == "train":
        return importlib.import_module("bistack.training").train
    if name == "cross_validate":
        return importlib.import_module("bistack.cv.run").cross_validate
    if name == "blend":
        return importlib.import_module("bistack.blends.run").blend
    raise AttributeError(f"module 'bistack' has no attribute {name!r}")
