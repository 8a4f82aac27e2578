"""What a user loads: each class loads its own kind from a model directory; ``load_model``
loads whichever kind a model directory holds, and ``open_model`` opens a model directory or a
directory ``bistack export`` wrote alike (``.model`` predicts, ``.card`` says what it offers).

``from bistack.api import Tagger`` (or ``Classifier``, ``Regressor``, ``LayerPoolingTagger``,
``LayerPoolingClassifier``, ``LayerPoolingRegressor``, ``LanguageModel``, and the records
``TaggedText``, ``TaggedSentence``, ``Entity``, ``TextPrediction``). The names are imported on
first use (each lives in its kind family's folder), so that importing this face loads no torch
until a PyTorch model is asked for."""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "Classifier": "bistack.text_models.text",
    "Entity": "bistack.taggers.models.records",
    "LanguageModel": "bistack.language_models.model",
    "LayerPoolingClassifier": "bistack.text_models.layer_text",
    "LayerPoolingRegressor": "bistack.text_models.layer_text",
    "LayerPoolingTagger": "bistack.taggers.models.layer_tagger",
    "Regressor": "bistack.text_models.text",
    "TaggedSentence": "bistack.taggers.models.records",
    "TaggedText": "bistack.taggers.models.records",
    "Tagger": "bistack.taggers.models.tagger",
    "TextPrediction": "bistack.text_models.prediction",
    "load_model": "bistack.predictor",
    "open_model": "bistack.predictor",
}


def __dir__() -> list[str]:
    return sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'bistack.api' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
