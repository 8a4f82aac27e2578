"""The layer poolers ``bistack compare-poolers`` knows: name -> ``layer_pooling`` settings.

Both LSTM summaries are there, so the common hand-written ``out[:, -1, :]`` is measured against
the final states.
"""

from __future__ import annotations

from typing import Any

POOLER_VARIANTS: dict[str, dict[str, Any]] = {
    "lstm": {"type": "lstm", "summary": "final_states", "vectors": "cls"},
    "lstm_last_output": {"type": "lstm", "summary": "last_output", "vectors": "cls"},
    "gru": {"type": "gru", "summary": "final_states", "vectors": "cls"},
    "weighted": {"type": "weighted", "vectors": "cls"},
    "attention": {"type": "attention", "vectors": "cls"},
    "cls": {"type": "cls"},
    "mean": {"type": "mean"},
    "concat_last4": {"type": "concat_last4", "vectors": "cls"},
    "concat_all": {"type": "concat_all", "vectors": "cls"},
    "lstm_over_means": {"type": "lstm", "summary": "final_states", "vectors": "mean"},
    "weighted_over_means": {"type": "weighted", "vectors": "mean"},
}
