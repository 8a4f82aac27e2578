"""What a user loads: ``Tagger``, ``Classifier`` and ``Regressor``, each from a model directory."""

from bistack.api.tagger import Entity, TaggedSentence, Tagger
from bistack.api.text import Classifier, Regressor, TextPrediction, load_text_model

__all__ = [
    "Classifier",
    "Entity",
    "Regressor",
    "TaggedSentence",
    "Tagger",
    "TextPrediction",
    "load_text_model",
]
