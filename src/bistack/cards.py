"""A model kind's card: what every outlet needs to know of it, as plain data that imports no
torch, and where its behaviour lives, reached only when used.

The facts: its name and description, the inputs it takes, what ``predict --format`` and its
options offer, how the served page shows a prediction, whether it samples text instead, the dev
metric that picks its best epoch, its build-order ladder. The behaviour, as ``"module:name"``
references (or the objects themselves): its config class, its recipe (``prepare``, run by the
one training driver), the class that loads its model directory, its export plan and the
runtime of its exported directory. Each family keeps its kinds' cards (``bistack.taggers.cards``
...); the task table (``bistack.tasks``) holds them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bistack.inputs import TEXT, Input
from bistack.metrics.dev import Metric

Ref = Any  # an object, or "module:name" naming it


def resolve(ref: Ref) -> Any:
    """The object ``ref`` names (``"bistack.taggers.tagger:Tagger"``), imported on first use."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Ladder:
    """The build-order ladder's rungs for a kind: the first rung's settings, the third rung
    (what the kind adds on top of a bidirectional encoder), and, where the kind has one, how
    its settings become a model that stacks a transformer's states beside its own features
    (``with_transformer(settings, backbone path)``: the optional "+ transformer states" rung)."""

    first: Mapping[str, Any]
    third_name: str
    third: Mapping[str, Any]
    with_transformer: Callable[[dict[str, Any], str], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Card:
    """One model kind.

    kind: written to config.json; description: a few words for messages;
    config, recipe, loader: its config class, how to train it (``prepare``, see
    ``bistack.runs.driver``), the class whose ``load(path, device)`` opens its model directory;
    metric: the dev metric that picks the best epoch (``metric_of(config)`` where the config
    decides it: taggers of plain tags are scored by accuracy);
    inputs: what it predicts from (the first that accepts a value takes it);
    predict_formats: what ``predict --format`` offers (first: the default; none: no predict, and
    ``predict_hint`` says what to use instead);
    predict_options: the options its ``predict`` takes (``attention``: token attention weights,
    which ``explain`` draws; ``min_confidence``; ``top_k``);
    view: how the served page shows a prediction (``entities`` inline, ``classes`` as
    probability bars, ``values`` in original units, a ``sample``d continuation);
    samples: whether it continues text (``sample``) instead of predicting;
    streams: whether ``predict --stream`` tags token by token (its model's ``streamer()``);
    ladder: its build-order ladder, if it has one; compares_poolers: whether
    ``compare-poolers`` trains its layer poolers;
    takes_tables: whether its recipe trains on tables handed over from Python
    (``bistack.train(train_data=...)``, which it is given as ``tables``);
    export, runtime: its export plan (the loaded model -> ``ExportPlan``) and the class whose
    ``load(path, threads)`` opens the directory it exports to; export_hint: why not, without;
    report: ``report(model, data_path) -> section``, what ``evaluate --report`` shows of it
    (plain data, ``bistack.reports`` draws it); without one, its scores alone.
    """

    kind: str
    description: str
    config: Ref
    recipe: Ref
    loader: Ref
    metric: Metric
    inputs: tuple[Input, ...] = (TEXT,)
    predict_formats: tuple[str, ...] = ("jsonl",)
    predict_hint: str = ""
    predict_options: frozenset[str] = frozenset()
    view: str = "classes"
    samples: bool = False
    streams: bool = False
    stream_hint: str = "only a recurrent tagger can stream"
    ladder: Ladder | None = None
    compares_poolers: bool = False
    takes_tables: bool = False
    export: Ref | None = None
    runtime: Ref | None = None
    export_hint: str = ""
    report: Ref | None = None
    metric_of: Callable[[Any], Metric] | None = field(default=None, compare=False)

    def metric_for(self, config: Any) -> Metric:
        """The dev metric that picks the best epoch of a run of ``config``."""
        return self.metric_of(config) if self.metric_of is not None else self.metric

    def takes(self, name: str) -> bool:
        """Whether it predicts from inputs named ``name`` ("text", "tokens")."""
        return any(i.name == name for i in self.inputs)

    def input_of(self, value: Any) -> Input | None:
        """The input that takes ``value``, or None."""
        return next((i for i in self.inputs if i.accepts(value)), None)

    @property
    def config_class(self) -> Any:
        return resolve(self.config)

    @property
    def prepare(self) -> Any:
        return resolve(self.recipe)

    @property
    def loader_class(self) -> Any:
        return resolve(self.loader)

    @property
    def export_plan(self) -> Any:
        return None if self.export is None else resolve(self.export)

    @property
    def report_builder(self) -> Any:
        return None if self.report is None else resolve(self.report)

    @property
    def runtime_class(self) -> Any:
        return None if self.runtime is None else resolve(self.runtime)
