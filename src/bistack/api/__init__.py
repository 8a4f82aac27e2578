"""What a user loads from a model directory. Each class loads its own kind; ``load_model``
(the task table) loads whichever kind a directory holds."""

from bistack.api.language_model import LanguageModel
from bistack.api.layer_tagger import LayerPoolingTagger
from bistack.api.layer_text import LayerPoolingClassifier, LayerPoolingRegressor
from bistack.api.tagger import Tagger
from bistack.api.tagging import Entity, TaggedSentence, TaggedText
from bistack.api.text import Classifier, Regressor
from bistack.api.text_outputs import TextPrediction

__all__ = [
    "Classifier",
    "Entity",
    "LanguageModel",
    "LayerPoolingClassifier",
    "LayerPoolingRegressor",
    "LayerPoolingTagger",
    "Regressor",
    "TaggedSentence",
    "TaggedText",
    "Tagger",
    "TextPrediction",
]
