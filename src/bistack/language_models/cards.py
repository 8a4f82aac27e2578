"""The language model's card (plain data, no torch; see ``bistack.cards``)."""

from __future__ import annotations

from bistack.cards import Card
from bistack.metrics.dev import Metric

DEV_PERPLEXITY = Metric("dev_perplexity", "dev perplexity", higher_is_better=False)

LANGUAGE_MODEL = Card(
    "language_model",
    "a causal language model",
    config="bistack.language_models.config:LanguageModelConfig",
    recipe="bistack.language_models.recipe:prepare_language_model",
    loader="bistack.language_models.model:LanguageModel",
    metric=DEV_PERPLEXITY,
    predict_formats=(),
    predict_hint="a language model predicts no labels; use bistack sample",
    export_hint="a language model samples token by token, which export does not cover",
    view="sample",
    samples=True,
)
CARDS = (LANGUAGE_MODEL,)
