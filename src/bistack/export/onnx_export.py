"""``bistack export MODEL_DIR --format onnx --output DIR``: a model directory as one ONNX graph.

The directory written holds ``model.onnx`` (the numeric model: embeddings, char encoder, the
recurrent encoder, pooling or the CRF decode), ``vocab.json`` (words, characters, tags) and
``export.json`` (the kind, the runtime that reads it, the training config and the output
settings). It is written whole beside ``DIR`` and renamed into place, so a failed export leaves
nothing behind; it is checked against PyTorch on a batch of mixed lengths before it is kept.

Traced with PyTorch's TorchScript-based exporter: it turns the scripted Viterbi loops into ONNX
``Loop`` nodes, which the ``torch.export``-based exporter cannot yet do for a loop whose trip
count is a tensor's size.
"""

from __future__ import annotations

import functools
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch

from bistack._version import __version__
from bistack.errors import ConfigError, ModelFileError, needs_extra
from bistack.files.modeldir import write_json
from bistack.files.onnx_session import (
    EXPORT_FILE,
    FORMAT,
    FORMAT_VERSION,
    MODEL_FILE,
    VOCAB_FILE,
    open_session,
)
from bistack.files.paths import claim_folder, refuse_overlap
from bistack.models.graphs import ExportPlan
from bistack.runs.model_card import CARD

OPSET = 17


def is_export_file(name: str) -> bool:
    """Whether an exported folder's entry ``name`` is one an export writes."""
    return name in (EXPORT_FILE, MODEL_FILE, f"{MODEL_FILE}.data", VOCAB_FILE, CARD) or (
        name == "tokenizer.json"
    )


def export_model(model_dir: str | Path, output: str | Path, *, overwrite: bool = False) -> Path:
    """Export the model in ``model_dir`` to the directory ``output``; returns ``output``."""
    from bistack.predictor import open_model

    try:
        import onnx  # noqa: F401 - the graph is written with it
        import onnxruntime  # noqa: F401 - and checked against PyTorch on it
    except ImportError as error:
        raise ConfigError(needs_extra("export", "onnx", error)) from None
    refuse_overlap(output, [("the model directory", model_dir)], "--output")
    model = open_model(model_dir)
    plan = model.export_plan()
    output = Path(output)
    claim = functools.partial(
        claim_folder,
        output,
        "--output",
        overwrite=overwrite,
        signature=EXPORT_FILE,
        ours=is_export_file,
    )
    claim()
    staging = output.parent / f".{output.name}.export-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        trace(plan, staging / MODEL_FILE)
        check_against_torch(plan, staging / MODEL_FILE)
        if plan.vocabularies:
            write_json(staging / VOCAB_FILE, plan.vocabularies)
        plan.write_files(staging)
        if (Path(model_dir) / CARD).is_file():  # the model's card travels with it
            shutil.copyfile(Path(model_dir) / CARD, staging / CARD)
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kind": model.card.kind,
            "bistack_version": __version__,
            "config": model.model.config.to_dict(),
            **plan.settings,
        }
        write_json(staging / EXPORT_FILE, meta)
        if claim():  # checked again: it may have changed
            shutil.rmtree(output)
        os.replace(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output


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
