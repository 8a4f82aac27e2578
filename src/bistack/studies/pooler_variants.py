"""The layer poolers ``bistack compare-poolers`` knows: name -> the ``layer_pooling`` settings
a pooler sets (its type, and an LSTM's summary). Everything else of ``layer_pooling`` (which
layers, the vectors read from each, the hidden size, dropout) comes from the config.

Both LSTM summaries are there, so the common hand-written ``out[:, -1, :]`` is measured against
the final states. The vectors each layer gives (its CLS vector or its token mean) are an axis
of their own: every pooler that reads them runs once for each of the vectors asked for, named
``POOLER-VECTORS``; the ``cls`` and ``mean`` poolers read their own, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bistack.errors import ConfigError

POOLER_VARIANTS: dict[str, dict[str, Any]] = {
    "lstm": {"type": "lstm", "summary": "final_states"},
    "lstm_last_output": {"type": "lstm", "summary": "last_output"},
    "gru": {"type": "gru", "summary": "final_states"},
    "weighted": {"type": "weighted"},
    "attention": {"type": "attention"},
    "cls": {"type": "cls"},
    "mean": {"type": "mean"},
    "concat_last4": {"type": "concat_last4"},
    "concat_all": {"type": "concat_all"},
}
VECTORS = ("cls", "mean")
# Poolers that read their own vectors (the last layer's CLS vector, its token mean).
OWN_VECTORS = ("cls", "mean")
# Names of earlier versions, pinned to one kind of vectors: now a pooler and --vectors.
RETIRED = {"lstm_over_means": "lstm", "weighted_over_means": "weighted"}


def pooler_runs(poolers: Sequence[str], vectors: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each run of a comparison of ``poolers`` over ``vectors``: its name (``POOLER-VECTORS``,
    or the pooler's own name where it reads its own vectors) -> its ``layer_pooling``
    settings, in order."""
    for name in poolers:
        if name in RETIRED:
            raise ConfigError(
                f"pooler {name!r} is now spelt --poolers {RETIRED[name]} --vectors mean (any "
                "pooler reads the vectors --vectors names; by default the config's)"
            )
        if name not in POOLER_VARIANTS:
            raise ConfigError(f"unknown pooler {name!r} (known: {', '.join(POOLER_VARIANTS)})")
    for kind in vectors:
        if kind not in VECTORS:
            raise ConfigError(f"unknown vectors {kind!r} (known: {', '.join(VECTORS)})")
    if not poolers or not vectors:
        raise ConfigError("a comparison needs at least one pooler and one kind of vectors")
    runs: dict[str, dict[str, Any]] = {}
    for name in poolers:
        settings = POOLER_VARIANTS[name]
        if settings["type"] in OWN_VECTORS:
            runs[name] = settings
        else:
            runs |= {f"{name}-{kind}": {**settings, "vectors": kind} for kind in vectors}
    return runs


def vectors_read(settings: dict[str, Any]) -> str:
    """Which vectors a run with ``layer_pooling`` ``settings`` (one of :func:`pooler_runs`)
    reads, in words."""
    if settings["type"] == "cls":
        return "the last layer's CLS vector"
    if settings["type"] == "mean":
        return "the last layer's token mean"
    return f"each layer's {'CLS vector' if settings['vectors'] == 'cls' else 'token mean'}"
