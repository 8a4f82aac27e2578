"""The language model's card (plain data, no torch; see ``bistack.cards``)."""

from __future__ import annotations

from bistack.cards import Card, PredictOption
from bistack.metrics.dev import Metric

DEV_PERPLEXITY = Metric("dev_perplexity", "dev perplexity", higher_is_better=False)

# What ``bistack sample`` and ``POST /sample`` take besides the prompt.
SAMPLE_OPTIONS = (
    PredictOption(
        "tokens", int, "at most this many tokens", default=30, low=1, high=500, metavar="N"
    ),
    PredictOption(
        "temperature",
        float,
        "softmax temperature (lower: surer, higher: freer)",
        default=1.0,
        low=0.0,
        low_open=True,
        high=10.0,
        metavar="T",
    ),
    PredictOption(
        "seed", int, "random seed, for repeatable samples", low=0, high=2**63 - 1, metavar="N"
    ),
)
LANGUAGE_MODEL = Card(
    "language_model",
    "a causal language model",
    config="bistack.language_models.config:LanguageModelConfig",
    recipe="bistack.language_models.recipe:prepare_language_model",
    loader="bistack.language_models.model:LanguageModel",
    metric=DEV_PERPLEXITY,
    formats=(),
    sample_options=SAMPLE_OPTIONS,
    view="sample",
    samples=True,
)
CARDS = (LANGUAGE_MODEL,)
