"""The op-level profile of ``make bench``: where the time of the two missed targets goes.

torch.profiler records every op of a few bucketed BiLSTM-CRF training steps (alternating with
the bare nn.LSTM on the same padded shape) and of cached LSTM-pooler epochs. Each op's self
time goes to one category, so the categories add up to the profiled wall time: a step's
phases are ``record_function`` ranges, and a range's own self time is the Python and other
code that ran outside any torch op. Run by speed_items.py as the ``profile`` item.
"""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from bistack.data.batching import collate_tagging
from bistack.runs.optimizers import build_optimizer

STEP_PHASES = ("collate", "forward", "backward", "clip", "optimizer")
WORD_RNN = "word BiLSTM: oneDNN RNN kernels, forward and backward"
CHAR = "char encoder kernels (oneDNN RNN or convolution), forward and backward"
OUTSIDE = "Python and other code outside torch ops"
STEP_CATEGORIES = (
    WORD_RNN,
    CHAR,
    "other forward ops: embedding lookups, dropout, reversals, CRF, emission layer",
    "their gradients",
    "gradient clipping and fused Adam (all parameters)",
    "collation (Python and tensor building)",
    OUTSIDE,
)


def _phase(event, phases: tuple[str, ...]) -> str | None:
    """The name of the innermost ``record_function`` range in ``phases`` holding ``event``."""
    while event is not None:
        if event.name in phases:
            return event.name
        event = event.cpu_parent
    return None


def _step_category(event, phase: str, word_gates: int) -> str:
    if phase == "collate":
        return STEP_CATEGORIES[5]
    if event.name == phase:  # the range's own self time: nothing inside a torch op
        return OUTSIDE
    if "mkldnn_rnn_layer" in event.name:
        weight = event.input_shapes[1] if len(event.input_shapes) > 1 else []
        return WORD_RNN if weight and weight[0] == word_gates else CHAR
    if "convolution" in event.name:  # the char CNN is the model's only convolution
        return CHAR
    return {
        "forward": STEP_CATEGORIES[2],
        "backward": STEP_CATEGORIES[3],
        "clip": STEP_CATEGORIES[4],
        "optimizer": STEP_CATEGORIES[4],
    }[phase]


def step_profile(model, vocabularies, encoded, config, batches: list[list[int]], label: str):
    """ms per step by category, for the tagger and for the bare nn.LSTM it alternates with."""
    optimizer = build_optimizer(config.optimizer, model)
    hidden = config.encoder.hidden_size
    bare = nn.LSTM(model.embedder.output_size, hidden, batch_first=True, bidirectional=True)
    model.train()

    def step(indices: list[int], bare_too: bool) -> None:
        with record_function("collate"):
            batch = collate_tagging([encoded[i] for i in indices], vocabularies)
        with record_function("forward"):
            loss = model(batch)
        with record_function("backward"):
            loss.backward()
        with record_function("clip"):
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if bare_too:
            padded = torch.randn((*batch.words.shape, model.embedder.output_size))
            with record_function("bare"):
                bare(padded)[0].sum().backward()

    for indices in batches[:3]:  # warm-up
        step(indices, True)
    measured = batches[3:]
    started = time.perf_counter()
    for indices in measured:
        step(indices, False)
    unprofiled = (time.perf_counter() - started) / len(measured)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
        for indices in measured:
            step(indices, True)
    spent = dict.fromkeys(STEP_CATEGORIES, 0.0)
    bare_total = bare_kernels = 0.0
    for event in profiler.events():
        phase = _phase(event, (*STEP_PHASES, "bare"))
        if phase is None:
            continue
        if phase == "bare":
            bare_total += event.self_cpu_time_total
            bare_kernels += event.self_cpu_time_total * ("mkldnn_rnn_layer" in event.name)
        else:
            spent[_step_category(event, phase, 4 * hidden)] += event.self_cpu_time_total
    per_step = 1000 * len(measured)  # microseconds in all -> ms per step
    return {
        "item": "profile-step",
        "what": label,
        "steps": len(measured),
        "unprofiled_step_ms": 1000 * unprofiled,
        "category_ms": {name: us / per_step for name, us in spent.items()},
        "bare_ms": bare_total / per_step,
        "bare_kernels_ms": bare_kernels / per_step,
    }


POOLER_PHASES = ("forward", "backward", "optimizer")
POOLER_RNN = "the pooler's BiLSTM: oneDNN RNN kernels, forward and backward"
POOLER_CATEGORIES = (
    POOLER_RNN,
    "other forward ops: summary, dropout, linear head, loss",
    "their gradients",
    "Adam",
    OUTSIDE,
)


def pooler_profile(backbone, layers: torch.Tensor, targets: torch.Tensor, config, minilm_s: float):
    """s per cached epoch by category, for the LSTM layer pooler at batch 32, beside the MiniLM
    forward pass over the same texts that the cache saves (``minilm_s``). ``layers``: (texts,
    layers, hidden) cached vectors; ``targets``: (texts,) class ids."""
    from bistack.text_models.layer_network import LayerBatch, build_layer_pooling_model

    num_outputs = 2 if targets.dim() == 1 else 1

    def epoch() -> None:
        torch.manual_seed(0)
        head = build_layer_pooling_model(
            config,
            backbone.num_layers,
            backbone.hidden_size,
            num_outputs,
            loss="mse" if num_outputs == 1 else "cross_entropy",
        )
        optimizer = build_optimizer(config.optimizer, head, groups_of=head.parameter_groups)
        for start in range(0, len(layers), 32):
            batch = LayerBatch(layers[start : start + 32], targets[start : start + 32])
            with record_function("forward"):
                loss = head(batch)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                optimizer.step()
                optimizer.zero_grad()

    epoch()  # warm-up
    started = time.perf_counter()
    epoch()
    unprofiled = time.perf_counter() - started
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        epoch()
    spent = dict.fromkeys(POOLER_CATEGORIES, 0.0)
    for event in profiler.events():
        phase = _phase(event, POOLER_PHASES)
        if phase is None:
            continue
        if event.name == phase:
            category = OUTSIDE
        elif "mkldnn_rnn_layer" in event.name:
            category = POOLER_RNN
        else:
            index = {"forward": 1, "backward": 2, "optimizer": 3}[phase]
            category = POOLER_CATEGORIES[index]
        spent[category] += event.self_cpu_time_total
    return {
        "item": "profile-pooler",
        "what": f"lstm layer pooler, a cached epoch over {len(layers)} SST-2 sentences",
        "unprofiled_epoch_s": unprofiled,
        "minilm_forward_s": minilm_s,
        "category_s": {name: us / 1e6 for name, us in spent.items()},
    }
