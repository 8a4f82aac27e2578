"""The task table: every model kind, and everything the rest of bistack needs to know of it.

``TASKS`` maps the kind written to config.json to a :class:`Task`: its config class, how to
train it (``prepare``, run by the one training driver), how to load it (a class satisfying
``api.predictor.Model``), the dev metric that picks its best epoch, and which outlets it offers.
The CLI, the ladder and compare-poolers look kinds up here; nothing else branches on a model's
kind. A new kind is one :func:`register` call plus its own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bistack.api.language_model import LanguageModel
from bistack.api.layer_tagger import LayerPoolingTagger
from bistack.api.layer_text import LayerPoolingClassifier, LayerPoolingRegressor
from bistack.api.predictor import Model
from bistack.api.streaming import StreamingTagger
from bistack.api.tagger import Tagger
from bistack.api.text import Classifier, Regressor
from bistack.config import (
    ExperimentConfig,
    LanguageModelConfig,
    LayerPoolingTaggerConfig,
    LayerPoolingTextConfig,
    TaggerConfig,
    TextModelConfig,
    build_config,
    read_yaml,
    upgrade_legacy,
)
from bistack.errors import ConfigError, ModelFileError
from bistack.export.plans import (
    ExportPlan,
    classifier_plan,
    layer_tagger_plan,
    layer_text_plan,
    regressor_plan,
    tagger_plan,
)
from bistack.modeldir import model_kind
from bistack.recipes.driver import (
    DEFAULT_OPTIONS,
    Metric,
    Prepare,
    RunOptions,
    TrainedModel,
    train_model,
)
from bistack.recipes.train_language_model import DEV_PERPLEXITY, prepare_language_model
from bistack.recipes.train_layer_pooling import prepare_layer_classifier, prepare_layer_regressor
from bistack.recipes.train_layer_tagger import prepare_layer_tagger
from bistack.recipes.train_tagger import DEV_F1, prepare_tagger, tagging_metric
from bistack.recipes.train_text import (
    DEV_ACCURACY,
    DEV_RMSE,
    prepare_classifier,
    prepare_regressor,
)


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
class Task:
    """One model kind.

    kind: written to config.json; description: a few words for messages;
    config: its config class; prepare: how to train it (see ``recipes.driver``);
    model: how to load it; metric: the dev metric that picks the best epoch;
    predict_formats: what ``predict --format`` offers (first: the default; none: no predict);
    predict_hint: what to use instead, when it has no predict;
    predict_options: the options its ``predict`` takes (``attention``: token attention weights,
    which ``explain`` draws; ``min_confidence``: leave out entities below a confidence);
    stream: how to tag token by token (``predict --stream``), if it can;
    ladder: its build-order ladder, if it has one;
    metric_of: the dev metric for a given config, where the config decides it (taggers of plain
    tags, such as parts of speech, are scored by accuracy, not entity F1);
    compares_poolers: whether ``compare-poolers`` trains its layer poolers;
    view: how the served web page shows a prediction (``entities`` inline, ``classes`` as
    probability bars, ``values`` in original units, a ``sample``d continuation);
    export: what ``bistack export`` writes for it (its graph and runtime), if it can be exported;
    export_hint: why not, when it cannot.
    """

    kind: str
    description: str
    config: type[ExperimentConfig]
    prepare: Prepare
    model: type[Model]
    metric: Metric
    predict_formats: tuple[str, ...] = ("jsonl",)
    predict_hint: str = ""
    predict_options: frozenset[str] = frozenset()
    stream: Callable[[Any], StreamingTagger] | None = None
    ladder: Ladder | None = None
    compares_poolers: bool = False
    view: str = "classes"
    export: Callable[[Any], ExportPlan] | None = None
    export_hint: str = ""
    metric_of: Callable[[Any], Metric] | None = None  # when the config chooses the metric

    def metric_for(self, config: ExperimentConfig) -> Metric:
        """The dev metric that picks the best epoch of a run of ``config``."""
        return self.metric_of(config) if self.metric_of is not None else self.metric


TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add a kind to the table (a kind registered twice is an error)."""
    if task.kind in TASKS:
        raise ValueError(f"model kind {task.kind!r} is already registered")
    TASKS[task.kind] = task
    return task


def task_of(kind: str, source: str = "config") -> Task:
    """The table entry of ``kind``; an unknown kind is an error that lists the known ones."""
    if kind not in TASKS:
        raise ConfigError(
            f"{source}: unknown model kind {kind!r} (known: {', '.join(sorted(TASKS))})"
        )
    return TASKS[kind]


def config_from_dict(data: dict[str, Any], source: str = "config") -> ExperimentConfig:
    """The validated config of the kind ``data`` names (``kind``, or an earlier version's
    ``task``); a config without either is a tagger's, as it always was."""
    data = upgrade_legacy(data, source)
    kind = data.get("kind", "tagger")
    if not isinstance(kind, str):
        raise ConfigError(f"{source}: kind must be a string, got {kind!r}")
    return build_config(task_of(kind, source).config, data, source)


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML config and apply ``key.sub=value`` overrides (values parsed as YAML)."""
    return config_from_dict(read_yaml(path, overrides), source=str(path))


def task_of_directory(path: str | Path) -> Task:
    """The table entry of the kind a model directory holds."""
    kind = model_kind(path)
    if kind not in TASKS:
        raise ModelFileError(
            f"{path}: holds a model of kind {kind!r}, which this bistack does not know "
            f"(known: {', '.join(sorted(TASKS))})"
        )
    return TASKS[kind]


def load_model(path: str | Path) -> Any:
    """Load whichever kind of model ``path`` holds (no unpickling)."""
    return task_of_directory(path).model.load(path)


def train(
    config: ExperimentConfig,
    output: str | Path,
    options: RunOptions = DEFAULT_OPTIONS,
    **inputs: Any,
) -> TrainedModel:
    """Train as ``config`` says, through the one driver; the best model goes to
    ``output/model``."""
    task = task_of(config.kind)
    return train_model(config, output, task.prepare, task.metric_for(config), options, **inputs)


def _stream(tagger: Tagger) -> StreamingTagger:
    return StreamingTagger(tagger)


def _tagger_with_transformer(settings: dict[str, Any], backbone: str) -> dict[str, Any]:
    """A recurrent tagger's settings as a tagger over a transformer's word states (frozen,
    first subword, mixed over layers) that stacks the recurrent tagger's features beside them."""
    kept = ("data", "features", "encoder", "head", "optimizer", "train")
    return {"kind": "layer_tagger", "backbone": {"path": backbone}} | {
        key: settings[key] for key in kept
    }


register(
    Task(
        "tagger",
        "a recurrent sequence tagger",
        TaggerConfig,
        prepare_tagger,
        Tagger,
        DEV_F1,
        metric_of=tagging_metric,
        predict_formats=("conll", "jsonl", "conllu", "doccano"),
        predict_options=frozenset({"min_confidence", "top_k"}),
        stream=_stream,
        export=tagger_plan,
        ladder=Ladder(
            {"encoder.bidirectional": False, "encoder.num_layers": 1, "encoder.residual": False}
            | {"head.type": "softmax"},
            "3. + CRF",
            {"head.type": "crf"},
            with_transformer=_tagger_with_transformer,
        ),
        view="entities",
    )
)
register(
    Task(
        "layer_tagger",
        "a tagger over a transformer's layers",
        LayerPoolingTaggerConfig,
        prepare_layer_tagger,
        LayerPoolingTagger,
        DEV_F1,
        metric_of=tagging_metric,
        predict_formats=("conll", "jsonl", "conllu", "doccano"),
        predict_options=frozenset({"min_confidence", "top_k"}),
        export=layer_tagger_plan,
        view="entities",
    )
)
_TEXT_LADDER = Ladder(
    {"encoder.bidirectional": False, "encoder.num_layers": 1, "encoder.residual": False}
    | {"pooling.type": "last"},
    "3. + attention pooling",
    {"pooling.type": "additive"},
)
register(
    Task(
        "classifier",
        "a recurrent text classifier",
        TextModelConfig,
        prepare_classifier,
        Classifier,
        DEV_ACCURACY,
        predict_options=frozenset({"attention"}),
        ladder=_TEXT_LADDER,
        export=classifier_plan,
        view="classes",
    )
)
register(
    Task(
        "regressor",
        "a recurrent text regressor",
        TextModelConfig,
        prepare_regressor,
        Regressor,
        DEV_RMSE,
        predict_options=frozenset({"attention"}),
        ladder=_TEXT_LADDER,
        export=regressor_plan,
        view="values",
    )
)
register(
    Task(
        "layer_classifier",
        "a classifier over a transformer's layers",
        LayerPoolingTextConfig,
        prepare_layer_classifier,
        LayerPoolingClassifier,
        DEV_ACCURACY,
        compares_poolers=True,
        export=layer_text_plan,
        view="classes",
    )
)
register(
    Task(
        "layer_regressor",
        "a regressor over a transformer's layers",
        LayerPoolingTextConfig,
        prepare_layer_regressor,
        LayerPoolingRegressor,
        DEV_RMSE,
        compares_poolers=True,
        export=layer_text_plan,
        view="values",
    )
)
register(
    Task(
        "language_model",
        "a causal language model",
        LanguageModelConfig,
        prepare_language_model,
        LanguageModel,
        DEV_PERPLEXITY,
        predict_formats=(),
        predict_hint="a language model predicts no labels; use bistack sample",
        export_hint="a language model samples token by token, which export does not cover",
        view="sample",
    )
)
