"""How a benchmark row is timed honestly: both sides of a comparison run the same stages inside
their timers, warmed up alike, 3 times, with the median and the spread kept.

A ``Side`` is one timed closure and the optimizer it steps (if any). ``stages_of`` runs a side
once under a tracer and names the stages its closure entered (strings to ids, collation,
tokenisation, backward, clipping, the optimizer's step, decoding, writing a file): a test reads
every comparison's two sides with it and fails when one side's timer holds a stage the
other's does not, or steps another kind of optimizer.
"""

from __future__ import annotations

import inspect
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch

REPEATS = 3


@dataclass
class Side:
    """One side of a comparison: the work its timer holds (``work``, called with nothing) and
    the optimizer that work steps, when it trains."""

    label: str
    work: Callable[[], object]
    optimizer: torch.optim.Optimizer | None = None


@dataclass
class Comparison:
    """Two sides doing the same work: bistack's (``ours``) and a floor's."""

    row: str
    what: str
    ours: Side
    floor: Side
    per: int  # items (sentences, texts) a call of ``work`` handles, for a rate
    unit: str = "s"
    extra: dict[str, Any] = field(default_factory=dict)


def synchronised(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def measure(device: torch.device, side: Side, repeats: int = REPEATS) -> dict[str, Any]:
    """One warm-up call (kernel choice, caches, lazy state), then ``repeats`` timed calls,
    each between device synchronisations: median, min, max and every run in seconds."""
    return measure_interleaved(device, [side], repeats)[0]


def measure_interleaved(
    device: torch.device, sides: list[Side], repeats: int = REPEATS
) -> list[dict[str, Any]]:
    """Each side warmed up, then timed in turn (A B A B...: a drift of the machine's speed
    falls on every side alike), ``repeats`` times each, every call between device
    synchronisations: each side's median, min, max and every run in seconds."""
    sync = synchronised(device)
    for side in sides:
        side.work()
    runs: list[list[float]] = [[] for _ in sides]
    for _ in range(repeats):
        for side, kept in zip(sides, runs, strict=True):
            sync()
            start = time.perf_counter()
            side.work()
            sync()
            kept.append(time.perf_counter() - start)
    return [
        {
            "median_s": statistics.median(kept),
            "min_s": min(kept),
            "max_s": max(kept),
            "runs_s": kept,
        }
        for kept in runs
    ]


def optimizer_kind(optimizer: torch.optim.Optimizer | None) -> tuple[str, str] | None:
    """The optimizer's class and implementation (fused, foreach or the per-parameter loop)."""
    if optimizer is None:
        return None
    optimizer = getattr(optimizer, "optimizer", optimizer)  # under Fabric's wrapper
    defaults = optimizer.defaults
    way = "fused" if defaults.get("fused") else "foreach" if defaults.get("foreach") else "loop"
    return type(optimizer).__name__, way


def unwrapped(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The optimizer itself, out of Fabric's wrapper."""
    return getattr(optimizer, "optimizer", optimizer)


# ---- the stages a timer can hold ------------------------------------------------------------


def _code(function: Any) -> CodeType:
    return inspect.unwrap(function).__code__


def stage_markers() -> dict[CodeType, str]:
    """Functions whose call marks a stage: bistack's and the floors' alike."""
    from bistack.crf import CRF
    from bistack.data.batching import (
        collate_encoded,
        collate_tagging,
        collate_text,
        collate_tokens,
    )
    from bistack.data.features import TokenVocabularies
    from bistack.kernels.crf_compiled import viterbi_best
    from bistack.kernels.crf_scan import viterbi_scan
    from bistack.models.backbone import TransformerBackbone
    from bistack.models.word_pieces import tokenize_words
    from bistack.taggers.emissions.confidence import crf_confidences

    markers = {
        _code(TokenVocabularies.encode): "strings to ids",
        _code(TokenVocabularies.ids_of): "strings to ids",  # a batch's distinct tokens at once
        _code(collate_tokens): "collation",
        _code(collate_encoded): "collation",
        _code(collate_tagging): "collation",
        _code(collate_text): "collation",
        _code(TransformerBackbone.batch_of): "collation",
        _code(TransformerBackbone.tokenize): "tokenisation",
        _code(tokenize_words): "tokenisation",
        _code(torch.Tensor.backward): "backward",
        _code(torch.nn.utils.clip_grad_norm_): "clipping",
        _code(viterbi_best): "decoding",
        _code(viterbi_scan): "decoding",
        _code(CRF.decode): "decoding",
        _code(crf_confidences): "confidences",
    }
    try:
        from torchcrf import CRF as TorchCRF

        markers[_code(TorchCRF.decode)] = "decoding"
    except ImportError:
        pass
    try:
        from safetensors.torch import save_file

        markers[_code(save_file)] = "writing a file"
    except ImportError:
        pass
    try:
        from transformers import PreTrainedTokenizerBase

        markers[_code(PreTrainedTokenizerBase.__call__)] = "tokenisation"
    except ImportError:
        pass
    return markers


def mark(stage: str) -> Callable[[Callable], Callable]:
    """A floor's own function marks ``stage`` (its hand-written collation, say)."""

    def marked(function: Callable) -> Callable:
        function.stage = stage  # type: ignore[attr-defined]
        return function

    return marked


def stages_of(side: Side, extra: dict[CodeType, str] | None = None) -> set[str]:
    """The stages ``side``'s work enters, found by tracing one call of it."""
    markers = stage_markers() | (extra or {})
    found: set[str] = set()

    def trace(frame: FrameType, event: str, _: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        stage = markers.get(code)
        if stage is None and code.co_name == "step" and "/torch/optim/" in code.co_filename:
            stage = "optimizer step"
        if stage is None:  # a floor's own function, marked
            function = frame.f_globals.get(code.co_name)
            if getattr(function, "__code__", None) is code:
                stage = getattr(function, "stage", None)
        if stage is not None:
            found.add(stage)

    sys.setprofile(trace)
    try:
        side.work()
    finally:
        sys.setprofile(None)
    return found


def unequal_stages(comparison: Comparison) -> list[str]:
    """What differs between the two timers: a stage on one side only, another optimizer."""
    ours, floor = stages_of(comparison.ours), stages_of(comparison.floor)
    problems = [f"{comparison.row}: only bistack's timer holds {s}" for s in sorted(ours - floor)]
    problems += [
        f"{comparison.row}: only the floor's timer holds {s}" for s in sorted(floor - ours)
    ]
    kinds = optimizer_kind(comparison.ours.optimizer), optimizer_kind(comparison.floor.optimizer)
    if kinds[0] != kinds[1]:
        problems.append(f"{comparison.row}: bistack steps {kinds[0]}, the floor {kinds[1]}")
    return problems
