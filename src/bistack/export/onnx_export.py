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

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bistack import __version__
from bistack.data.features import TokenVocabularies, token_rows
from bistack.errors import ConfigError, ModelFileError
from bistack.export.graphs import DYNAMIC_AXES, INPUTS
from bistack.export.plans import ExportPlan
from bistack.export.runtime import EXPORT_FILE, FORMAT, MODEL_FILE, VOCAB_FILE

OPSET = 17
# Outputs must match PyTorch this closely on the check batch, absolutely and relative to their
# size (float32 both; a regressor's calibration can scale its values well past 1).
TOLERANCE = 1e-5


def export_model(model_dir: str | Path, output: str | Path, *, overwrite: bool = False) -> Path:
    """Export the model in ``model_dir`` to the directory ``output``; returns ``output``."""
    from bistack.tasks import task_of_directory

    task = task_of_directory(model_dir)
    if task.export is None:
        raise ConfigError(f"{model_dir} holds {task.description}: {task.export_hint}")
    output = Path(output)
    if output.exists() and not overwrite and (not output.is_dir() or any(output.iterdir())):
        raise ConfigError(f"{output} already exists; choose another --output or pass --overwrite")
    model = task.model.load(model_dir)
    plan = task.export(model)
    staging = output.parent / f".{output.name}.export-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        trace(plan, model.vocabularies, staging / MODEL_FILE)
        check_against_torch(plan, model.vocabularies, staging / MODEL_FILE)
        write_json(staging / VOCAB_FILE, model.vocabularies.to_json())
        meta = {
            "format": FORMAT,
            "kind": task.kind,
            "runtime": plan.runtime,
            "view": task.view,
            "bistack_version": __version__,
            "config": model.config.to_dict(),
            **plan.settings,
        }
        write_json(staging / EXPORT_FILE, meta)
        if output.exists():
            shutil.rmtree(output)
        os.replace(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def example_inputs(vocabularies: TokenVocabularies, lengths: list[int]) -> tuple[torch.Tensor, ...]:
    """A batch of sentences of ``lengths`` made of the vocabulary's own words (the last one
    spelled with a character it has never seen), as the graph's inputs."""
    words = [w for w in vocabularies.words.items[2:] if w] or ["word"]
    sentences = []
    for row, length in enumerate(lengths):
        tokens = [words[(row * 7 + i) % len(words)] for i in range(length)]
        if row == len(lengths) - 1:
            tokens[-1] = tokens[-1] + "\u2603"
        sentences.append(vocabularies.encode(tokens))
    rows = token_rows(sentences, vocabularies)
    arrays = (rows.words, rows.casing, rows.chars, rows.char_lengths, rows.char_index)
    return (*(torch.tensor(a) for a in arrays), torch.tensor(rows.lengths))


def trace(plan: ExportPlan, vocabularies: TokenVocabularies, path: Path) -> None:
    """Trace ``plan.graph`` into ``path`` with every batch dimension dynamic."""
    inputs = example_inputs(vocabularies, [5, 3, 2])
    with warnings.catch_warnings(), torch.no_grad():
        # The tracer warns at each Python branch on a tensor (the input checks, which pass) and
        # that this exporter is the older of two; neither concerns the graph written.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            plan.graph,
            inputs,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=list(INPUTS),
            output_names=list(plan.output_names),
            dynamic_axes={**DYNAMIC_AXES, **{name: {0: "batch"} for name in plan.output_names}},
        )


def check_against_torch(plan: ExportPlan, vocabularies: TokenVocabularies, path: Path) -> None:
    """Run the exported graph and PyTorch on a batch of other lengths than the traced one (1, 9
    and 4 tokens); a difference means the export is wrong, and nothing is kept."""
    from bistack.export.runtime import open_session

    inputs = example_inputs(vocabularies, [1, 9, 4])
    with torch.no_grad():
        expected = plan.graph(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    session = open_session(path)
    feed = {i.name: inputs[INPUTS.index(i.name)].numpy() for i in session.get_inputs()}
    got = session.run(None, feed)
    for name, want, have in zip(plan.output_names, expected, got, strict=True):
        want = want.numpy()
        same = (
            np.array_equal(want, have)
            if want.dtype.kind == "i"
            else np.allclose(want, have, rtol=TOLERANCE, atol=TOLERANCE)
        )
        if not same:
            raise ModelFileError(
                f"the exported graph's {name!r} differs from PyTorch's on a check batch; "
                "nothing was written (please report this with the model's config.json)"
            )
