"""What each model kind exports: its inference graph, the runtime that reads it, and the
settings that runtime needs. The task table names one plan per kind that can be exported."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from bistack.export.graphs import TaggerGraph, TextGraph

# How an exported directory is run (``bistack.export.runtime.RUNTIMES``): "tagging" turns tag
# ids into entities; "text" turns probabilities or values into labelled records.
TAGGING, TEXT = "tagging", "text"


@dataclass(frozen=True)
class ExportPlan:
    """graph: the module traced into ``model.onnx``; runtime: ``TAGGING`` or ``TEXT``;
    settings: what that runtime needs beside the config and vocabularies."""

    graph: nn.Module
    output_names: tuple[str, ...]
    runtime: str
    settings: dict[str, Any] = field(default_factory=dict)


def tagger_plan(tagger: Any) -> ExportPlan:
    """A recurrent tagger: the whole network and its CRF decode; tags come out."""
    graph = TaggerGraph(tagger.model)
    return ExportPlan(graph, graph.OUTPUTS, TAGGING, {"output_scheme": tagger.output_scheme})


def classifier_plan(classifier: Any) -> ExportPlan:
    """A recurrent classifier: probabilities come out, temperature-scaled as in PyTorch."""
    graph = TextGraph(
        classifier.model, attends=classifier.attends, temperature=classifier.outputs.temperature
    )
    return ExportPlan(graph, graph.output_names, TEXT, {"outputs": classifier.outputs.info})


def regressor_plan(regressor: Any) -> ExportPlan:
    """A recurrent regressor: values in original units come out, calibrated as in PyTorch."""
    info = regressor.outputs.info
    count = len(info["targets"])
    scale, offset = [1.0] * count, [0.0] * count
    if info.get("calibration") is not None:
        scale = [float(pair[0]) for pair in info["calibration"]]
        offset = [float(pair[1]) for pair in info["calibration"]]
    affine = (list(info["mean"]), list(info["std"]), scale, offset)
    graph = TextGraph(regressor.model, attends=regressor.attends, affine=affine)
    return ExportPlan(graph, graph.output_names, TEXT, {"outputs": info})
