"""What a user loads from a model directory. Each class loads its own kind; ``load_model``
(the task table) loads whichever kind a directory holds.

``from bistack.api import Tagger`` (or ``Classifier``, ``Regressor``, ``LayerPoolingTagger``,
``LayerPoolingClassifier``, ``LayerPoolingRegressor``, ``LanguageModel``, and the records
``TaggedText``, ``TaggedSentence``, ``Entity``, ``TextPrediction``). The names are imported on
first use, so that modules in this package that need no torch (the prediction records,
``predictor``) can be used where torch is not installed (an exported model's runtime)."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Classifier": "bistack.api.text",
    "Entity": "bistack.api.tagging",
    "LanguageModel": "bistack.api.language_model",
    "LayerPoolingClassifier": "bistack.api.layer_text",
    "LayerPoolingRegressor": "bistack.api.layer_text",
    "LayerPoolingTagger": "bistack.api.layer_tagger",
    "Regressor": "bistack.api.text",
    "TaggedSentence": "bistack.api.tagging",
    "TaggedText": "bistack.api.tagging",
    "Tagger": "bistack.api.tagger",
    "TextPrediction": "bistack.api.text_prediction",
}


def __dir__() -> list[str]:
    return sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'bistack.api' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
