"""``bistack export MODEL_DIR --format onnx --output DIR``: a model directory as one ONNX graph.

The directory written holds ``model.onnx`` (the numeric model: embeddings, char encoder, the
recurrent encoder, pooling or the CRF decode), ``vocab.json`` (words, characters, tags) and
``export.json`` (the kind, the runtime that reads it, the training config and the output
settings). It is written whole beside ``DIR`` and renamed into place, so a failed export leaves
nothing behind; it is checked against PyTorch on a batch of mixed lengths before it is kept.

An ensemble's members are exported each into ``members/NAME``; those over one frozen backbone
read alike (as the PyTorch ensemble shares it) hold only their heads, and the backbone's graph
is written once, under ``stages/NAME`` (``stage.json`` beside it), which the runtime runs once
a batch for all of them.

Traced with PyTorch's TorchScript-based exporter: it turns the scripted Viterbi loops into ONNX
``Loop`` nodes, which the ``torch.export``-based exporter cannot yet do for a loop whose trip
count is a tensor's size.
"""

from __future__ import annotations

import functools
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from bistack._version import __version__
from bistack.errors import ConfigError, ModelFileError, needs_extra
from bistack.files.claim import Layout, claim_folder, files_only, output_folder, staged
from bistack.files.ensemble_dir import ENSEMBLE_FILE, MEMBERS
from bistack.files.modeldir import write_json
from bistack.files.onnx_session import (
    EXPORT_FILE,
    FORMAT,
    FORMAT_VERSION,
    MODEL_FILE,
    STAGE_FILE,
    STAGES,
    TOKENIZER_FILE,
    VOCAB_FILE,
    open_session,
)
from bistack.files.paths import refuse_overlap
from bistack.files.swap import atomic_folder
from bistack.models.graphs import ExportPlan
from bistack.predictor import open_model
from bistack.runs.model_card import CARD

if TYPE_CHECKING:
    from bistack.cards import Card

OPSET = 17


EXPORTED_FILES = (EXPORT_FILE, MODEL_FILE, f"{MODEL_FILE}.data", VOCAB_FILE, CARD, TOKENIZER_FILE)
STAGE_FILES = (STAGE_FILE, MODEL_FILE, f"{MODEL_FILE}.data", TOKENIZER_FILE)


def export_layout(name: str) -> Layout | bool:
    """An exported folder's layout (see ``bistack.files.claim``): one model's files, or an
    ensemble's ``ensemble.json``, one such folder a member under ``members/`` and a shared
    backbone's under ``stages/``."""
    if name in (MEMBERS, STAGES):
        files = EXPORTED_FILES if name == MEMBERS else STAGE_FILES
        return lambda entry: staged(entry) if entry.startswith(".") else files_only(*files)
    return name in (*EXPORTED_FILES, ENSEMBLE_FILE) or staged(name)


def export_model(model_dir: str | Path, output: str | Path, *, overwrite: bool = False) -> Path:
    """Export the model in ``model_dir`` to the directory ``output``; returns ``output``."""
    try:
        import onnx  # noqa: F401 - the graph is written with it
        import onnxruntime  # noqa: F401 - and checked against PyTorch on it
    except ImportError as error:
        raise ConfigError(needs_extra("export", "onnx", error)) from None
    refuse_overlap(output, [("the model directory", model_dir)], "--output")
    model = open_model(model_dir)
    plans = model.export_plans()
    output = output_folder(output, "--output")
    claim = functools.partial(
        claim_folder,
        output,
        "--output",
        overwrite=overwrite,
        signature=ENSEMBLE_FILE if model.files.ensemble else EXPORT_FILE,
        layout=export_layout,
    )
    claim()
    with atomic_folder(output) as staging:
        if model.files.ensemble:  # each member a graph of its own, averaged as PyTorch does
            stages, heads = shared_stages(plans)
            for name, stage in stages.items():
                write_stage(stage, staging / STAGES / name)
            for index, (folder, member, plan, card) in enumerate(plans):
                if index in heads:  # its head alone; the backbone's graph is its stage's
                    stage_name, plan = heads[index]
                    plan.settings["stage"] = f"../../{STAGES}/{stage_name}"
                write_export(card, member.config, plan, folder, staging / MEMBERS / folder.name)
            write_json(staging / ENSEMBLE_FILE, {**model.files.meta, "exported": True})
        else:
            folder, one, plan, card = plans[0]
            write_export(card, one.config, plan, folder, staging)
        claim()  # checked again, just before the swap: it may have changed
    return output


def write_export(card: Card, config: Any, plan: ExportPlan, model_dir: Path, target: Path) -> None:
    """The exported directory of ``plan`` (of a model of ``card``'s kind and ``config``,
    opened from ``model_dir``) at ``target``: the graph, checked against PyTorch, its
    vocabularies, files, card and export.json."""
    target.mkdir(parents=True, exist_ok=True)
    trace(plan, target / MODEL_FILE)
    check_against_torch(plan, target / MODEL_FILE)
    if plan.vocabularies:
        write_json(target / VOCAB_FILE, plan.vocabularies)
    plan.write_files(target)
    if (model_dir / CARD).is_file():  # the model's card travels with it
        shutil.copyfile(model_dir / CARD, target / CARD)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": card.kind,
        "bistack_version": __version__,
        "config": config.to_dict(),
        **plan.settings,
    }
    write_json(target / EXPORT_FILE, meta)


def shared_stages(
    plans: list[tuple[Path, Any, ExportPlan, Card]],
) -> tuple[dict[str, ExportPlan], dict[int, tuple[str, ExportPlan]]]:
    """Members over one frozen backbone read alike (their shared stage equal, two or more, of
    kinds whose card exports a shared backbone): the backbones' plans by stage name
    (``stage0``...), and each such member's head plan with its stage's name, by its index."""
    groups: dict[Any, list[int]] = {}
    for index, (_, member, _, card) in enumerate(plans):
        key = member.shared_stage_key() if card.shared_export_plans is not None else None
        if key is not None:
            groups.setdefault(key, []).append(index)
    stages: dict[str, ExportPlan] = {}
    heads: dict[int, tuple[str, ExportPlan]] = {}
    shared = [indices for indices in groups.values() if len(indices) > 1]
    for number, indices in enumerate(shared):
        card = plans[indices[0]][3]
        stage, members = card.shared_export_plans([plans[i][1] for i in indices])
        stages[f"stage{number}"] = stage
        heads |= {i: (f"stage{number}", plan) for i, plan in zip(indices, members, strict=True)}
    return stages, heads


def write_stage(plan: ExportPlan, target: Path) -> None:
    """A shared backbone's graph at ``target``, checked against PyTorch, with its files and
    ``stage.json`` (how it reads texts, and what it gives)."""
    target.mkdir(parents=True, exist_ok=True)
    trace(plan, target / MODEL_FILE)
    check_against_torch(plan, target / MODEL_FILE)
    plan.write_files(target)
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "bistack_version": __version__}
    write_json(target / STAGE_FILE, meta | plan.settings)


def trace(plan: ExportPlan, path: Path) -> None:
    """Trace ``plan.graph`` into ``path`` with every batch dimension dynamic."""
    with warnings.catch_warnings(), torch.no_grad():
        # The tracer warns at each Python branch on a tensor (the input checks, which pass) and
        # that this exporter is the older of two; neither concerns the graph written.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            plan.graph,
            plan.examples(0),
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=list(plan.input_names),
            output_names=list(plan.output_names),
            dynamic_axes={name: dict(axes) for name, axes in plan.dynamic_axes.items()},
        )


def check_against_torch(plan: ExportPlan, path: Path) -> None:
    """Run the exported graph and PyTorch on inputs of other sizes than the traced ones; a
    difference means the export is wrong, and nothing is kept."""
    inputs = plan.examples(1)
    with torch.no_grad():
        expected = plan.graph(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    session = open_session(path)
    names = list(plan.input_names)
    feed = {i.name: inputs[names.index(i.name)].numpy() for i in session.get_inputs()}
    got = session.run(None, feed)
    for name, want, have in zip(plan.output_names, expected, got, strict=True):
        want = want.numpy()
        tolerance = plan.tolerance
        same = (
            np.array_equal(want, have)
            if want.dtype.kind == "i"
            else np.allclose(want, have, rtol=tolerance, atol=tolerance)
        )
        if not same:
            raise ModelFileError(
                f"the exported graph's {name!r} differs from PyTorch's on a check batch; "
                "nothing was written (please report this with the model's config.json)"
            )
