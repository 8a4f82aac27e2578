"""Causality: a guard against bidirectional encoders where the future must stay unseen, and a
check that a model's output at position t depends on tokens up to t only.

Seed, "Where you cannot use it": a bidirectional encoder's backward direction has read every
token after t, so in streaming it needs tokens that have not arrived, and in language modelling
it sees the token it is asked to predict: training loss falls toward 0 while nothing is learned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from bistack.errors import BistackError

LEAKAGE_EXPLANATION = (
    "its output at position t may depend only on tokens up to t, but a bidirectional "
    "encoder's backward direction has read every token after t: a streaming model would need "
    "tokens that have not arrived, and a language model "
    "would see the very token it must predict, so its training perplexity collapses toward 1 "
    "while it learns nothing. Use a unidirectional encoder (encoder.bidirectional: false)"
)


class LeakageError(BistackError, ValueError):
    """A causal model whose outputs see the future, or a bidirectional encoder where one is
    not allowed."""


def require_causal(bidirectional: bool, what: str, allow_leakage: bool = False) -> None:
    """Refuse a bidirectional encoder for ``what`` (e.g. "a language model"), unless
    ``allow_leakage`` says, explicitly, that the leakage is wanted (a demonstration)."""
    if bidirectional and not allow_leakage:
        raise LeakageError(f"{what} is causal: {LEAKAGE_EXPLANATION}")


def check_causal(
    model: Any,
    batch: Any,
    *,
    field: str = "words",
    vocab_size: int | None = None,
    outputs: Callable[[Any], Tensor] | None = None,
    atol: float = 1e-5,
    seed: int = 0,
) -> None:
    """Fail with :class:`LeakageError` if an output at a position <= t changes when only tokens
    after t change, for every t.

    ``batch`` is a dataclass whose ``field`` holds token ids ``(batch_size, seq_len)``;
    ``outputs(batch)`` (default ``model.position_outputs``) gives per-position outputs
    ``(batch_size, seq_len, ...)``. Tokens after t are replaced by other ids in
    ``1..vocab_size-1`` (0 is padding); the model runs in eval mode, so dropout cannot hide or
    fake a change.
    """
    run = outputs or model.position_outputs
    tokens: Tensor = getattr(batch, field)
    if vocab_size is None:
        vocab_size = int(tokens.max()) + 2
    if vocab_size < 3:
        raise ValueError("need at least two non-padding token ids to perturb")
    generator = torch.Generator().manual_seed(seed)
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        with torch.no_grad():
            reference = run(batch)
            seq_len = tokens.shape[1]
            for t in range(seq_len - 1):
                shift = torch.randint(1, vocab_size - 1, tokens.shape, generator=generator)
                changed = (tokens - 1 + shift) % (vocab_size - 1) + 1  # != tokens, never 0
                perturbed = tokens.clone()
                perturbed[:, t + 1 :] = changed[:, t + 1 :]
                perturbed = torch.where(tokens == 0, tokens, perturbed)  # padding stays padding
                output = run(dataclasses.replace(batch, **{field: perturbed}))
                difference = (output[:, : t + 1] - reference[:, : t + 1]).abs()
                if float(difference.max()) > atol:
                    position = int(difference.flatten(2).amax(dim=(0, 2)).argmax())
                    raise LeakageError(
                        f"the output at position {position} changed by "
                        f"{float(difference.max()):.3g} when only tokens after position {t} "
                        "changed: the model sees the future"
                    )
    finally:
        model.train(was_training)
