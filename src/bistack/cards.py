"""A model kind's card: what every outlet needs to know of it, as plain data that imports no
torch, and where its behaviour lives, reached only when used.

The facts: its name and description, the inputs it takes, the output formats ``predict --format``
writes (each an :class:`OutputFormat`: name, what it writes, its writer) and the options of
``predict`` and ``sample`` (each declared once, as a :class:`PredictOption`: the command line's
flags, the server's request fields and the Ray step's keywords are built from these, and one check,
:meth:`Card.checked_request`, serves them all), how the served page shows a prediction, whether it
samples text instead, the dev metric that picks its best epoch, its build-order ladder. The
behaviour, as ``"module:name"`` references (or the objects themselves): its config class, its recipe
(``prepare``, run by the one training driver), the class that loads its model directory, its export
plan and the runtime of its exported directory. Each family keeps its kinds' cards
(``bistack.taggers.cards`` ...); the task table (``bistack.tasks``) holds them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bistack.errors import ConfigError
from bistack.inputs import TEXT, Input
from bistack.metrics.dev import Metric

Ref = Any  # an object, or "module:name" naming it


class RequestError(ConfigError):
    """A format or option a kind does not offer, or an option's value out of its range."""


@dataclass(frozen=True)
class PredictOption:
    """One option of a kind's ``predict``, declared once.

    name: the keyword of ``Model.predict`` (``top_k``; the command line spells it ``--top-k``);
    kind: ``bool`` (a switch), ``int`` or ``float``; low, high: the values it may take
    (inclusive, or above ``low`` alone when ``low_open``; None: unbounded); default: the value
    that asks for nothing (a prediction without the option); help: what it does, in a few
    words; metavar: how the command line names its value; formats: the ``predict --format``
    outputs that carry it (empty: every one); low_open: ``low`` itself is out of range;
    for_writer: an option of the output format's writer (a table's columns), which the model's
    ``predict`` never sees. Two kinds may offer an option of one name only as the same
    declaration.
    """

    name: str
    kind: type
    help: str
    default: Any = None
    low: float | None = None
    high: float | None = None
    metavar: str | None = None
    formats: tuple[str, ...] = ()
    low_open: bool = False
    for_writer: bool = False

    def carried_by(self, fmt: str) -> bool:
        """Whether output format ``fmt`` carries it (a served JSON record: ``jsonl``)."""
        return not self.formats or fmt in self.formats

    def asks_nothing(self, value: Any) -> bool:
        """Whether ``value`` leaves the prediction as it is without the option: None, or the
        default itself (``top_k=1``, ``attention=False``)."""
        return value is None or (value == self.default and type(value) is type(self.default))

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def checked(self, value: Any, spelled: str) -> Any:
        """``value`` as this option takes it; RequestError naming ``spelled`` otherwise (a bool
        is not a number here, and a number is not a switch)."""
        if self.kind is bool:
            if not isinstance(value, bool):
                raise RequestError(f"{spelled}: true or false, not {value!r}")
            return value
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (self.kind is int and not float(value).is_integer()):
            raise RequestError(
                f"{spelled}: a{'n integer' if self.kind is int else ' number'}, not {value!r}"
            )
        value = self.kind(value)
        if value != value or not self.within(value):
            raise RequestError(f"{spelled}: {self.bounds()}, not {value}")
        return value

    def within(self, value: float) -> bool:
        above = self.low is None or value > self.low or (value == self.low and not self.low_open)
        return above and (self.high is None or value <= self.high)

    def bounds(self) -> str:
        def shown(bound: float) -> str:  # an int's bound in full (a seed's 2^63-1)
            return str(bound) if self.kind is int else f"{bound:g}"

        low = None if self.low is None else f"{'>' if self.low_open else '>='} {shown(self.low)}"
        high = None if self.high is None else f"<= {shown(self.high)}"
        if self.low is not None and self.high is not None and not self.low_open:
            return f"between {shown(self.low)} and {shown(self.high)}"
        return " and ".join(part for part in (low, high) if part is not None)


@dataclass(frozen=True)
class OutputFormat:
    """One output of ``predict --format``, declared by the kinds that write it.

    name: what ``--format`` calls it; about: what it writes, in a few words (the help);
    writer: ``writer(prediction, extra) -> str``, one prediction as the format writes it, after
    ``extra`` where the format has room for it (an --input record's line or row, and its id),
    as an object or ``"module:name"``; table: for a table (CSV, TSV), instead,
    ``table(model, id_field, options)``, whose ``head`` is the first line (its columns, as the
    model and the options make them) and ``row(prediction, extra)`` each prediction's line;
    suffixes: the ``--output`` file suffixes that name the format. Two kinds may write a format
    of one name only with the same declaration.
    """

    name: str
    about: str
    writer: Ref | None = None
    table: Ref | None = None
    suffixes: tuple[str, ...] = ()

    def write(self, prediction: Any, extra: dict[str, Any] | None = None) -> str:
        return str(resolve(self.writer)(prediction, extra))

    def lines(
        self, model: Any, id_field: str | None, options: dict[str, Any]
    ) -> tuple[str, Callable[[Any, dict[str, Any] | None], str]]:
        """The first line (a table's head; "" where the format has none) and what writes each
        prediction's, for ``model``'s predictions with ``options`` (``id_field``: the id each
        record keeps, where asked)."""
        if self.table is None:
            return "", self.write
        table = resolve(self.table)(model, id_field, options)
        return table.head, table.row


# The one format every kind that predicts writes: its predictions' records as JSON lines.
JSONL = OutputFormat(
    "jsonl",
    "one JSON object a prediction",
    "bistack.files.formats:jsonl_line",
    suffixes=(".jsonl", ".ndjson"),
)


def csv_table(model: Any, id_field: str | None, options: dict[str, Any]) -> Any:
    """A model's predictions as a CSV table: its family's (``model.prediction_table``)."""
    return model.prediction_table(",", id_field, options)


def tsv_table(model: Any, id_field: str | None, options: dict[str, Any]) -> Any:
    """A model's predictions as a TSV table: its family's (``model.prediction_table``)."""
    return model.prediction_table("\t", id_field, options)


# A table a submission takes as it is, each family's own (a text model's: a row a text, its
# label or values; a tagger's: a row an entity), after each record's id (--id-field) or row.
TABLE_ABOUT = (
    "a table: the id (--id-field) or row, then a text's label or values, or a row an entity"
)
CSV = OutputFormat("csv", f"{TABLE_ABOUT}; comma-separated", table=csv_table, suffixes=(".csv",))
TSV = OutputFormat("tsv", f"{TABLE_ABOUT}; tab-separated", table=tsv_table, suffixes=(".tsv",))


def resolve(ref: Ref) -> Any:
    """The object ``ref`` names (``"bistack.taggers.models.tagger:Tagger"``), imported on first
    use."""
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
class Exporting:
    """How a kind exports (``bistack export``): ``plan``, the loaded model -> ``ExportPlan``;
    ``runtime``, the class whose ``load(path, threads)`` opens the directory it exports to;
    ``shared``, the plans of an exported ensemble's members over one frozen backbone
    (``plans(models) -> (the backbone's, [each member's head])``: the backbone's graph once;
    None: each member's whole graph)."""

    plan: Ref
    runtime: Ref
    shared: Ref | None = None


@dataclass(frozen=True)
class CrossValidating:
    """How ``bistack cv`` splits, trains and scores a kind: ``family``, a class its module
    types as ``type[bistack.folds.contract.FoldFamily[...]]``, built by its ``of``;
    ``ensemble``, the class whose ``open(path, meta, loader, device)`` opens the fold models as
    one; ``blend``, what reads its CVs' out-of-fold predictions for ``bistack blend`` (a
    ``bistack.folds.blending.BlendPart``, ``read(card, folder, config, plan, metric)``; None:
    its CVs are not blended)."""

    family: Ref
    ensemble: Ref
    blend: Ref | None = None


@dataclass(frozen=True)
class Card:
    """One model kind.

    kind: written to config.json; description: a few words for messages;
    config, recipe, loader: its config class, how to train it (``prepare``, see
    ``bistack.runs.driver``), the class whose ``load(path, device)`` opens its model directory;
    metric: the dev metric that picks the best epoch (``metric_of(config)`` where the config
    decides it: taggers of plain tags are scored by accuracy);
    inputs: what it predicts from (the first that accepts a value takes it);
    formats: what ``predict --format`` writes (:class:`OutputFormat`; first: the default; none:
    no predict);
    predict_options: the options its ``predict`` takes, declared (:class:`PredictOption`);
    sample_options: the options of its ``sample`` (``bistack sample`` and ``POST /sample``),
    declared alike, where it samples;
    view: how the served page shows a prediction (``entities`` inline, ``classes`` as
    probability bars, ``values`` in original units, a ``sample``d continuation);
    samples: whether it continues text (``sample``) instead of predicting;
    streams: whether ``predict --stream`` tags token by token (its model's ``streamer()``);
    what it can do besides, each None (or false) where it cannot, the refusal naming the kinds
    that can: ladder, its build-order ladder; compares_poolers, whether ``compare-poolers``
    trains its layer poolers; takes_tables, whether its recipe trains on tables handed over
    from Python (``bistack.train(train_data=...)``, given as ``tables``); exporting, its export
    (:class:`Exporting`); report, ``report(model, data_path) -> section``, what ``evaluate
    --report`` shows of it (plain data, ``bistack.reports`` draws it; without one, its scores
    alone); cross_validating, its ``bistack cv`` (:class:`CrossValidating`).
    """

    kind: str
    description: str
    config: Ref
    recipe: Ref
    loader: Ref
    metric: Metric
    inputs: tuple[Input, ...] = (TEXT,)
    formats: tuple[OutputFormat, ...] = (JSONL,)
    predict_options: tuple[PredictOption, ...] = ()
    sample_options: tuple[PredictOption, ...] = ()
    view: str = "classes"
    samples: bool = False
    streams: bool = False
    ladder: Ladder | None = None
    compares_poolers: bool = False
    takes_tables: bool = False
    exporting: Exporting | None = None
    report: Ref | None = None
    cross_validating: CrossValidating | None = None
    metric_of: Callable[[Any], Metric] | None = field(default=None, compare=False)

    def metric_for(self, config: Any) -> Metric:
        """The dev metric that picks the best epoch of a run of ``config``."""
        return self.metric_of(config) if self.metric_of is not None else self.metric

    @property
    def predict_formats(self) -> tuple[str, ...]:
        """The names of what ``predict --format`` writes (first: the default)."""
        return tuple(f.name for f in self.formats)

    def output_format(self, name: str) -> OutputFormat:
        """The format ``name`` (one :meth:`checked_request` accepted)."""
        return next(f for f in self.formats if f.name == name)

    def checked_sample(
        self, options: dict[str, Any], spelled: Callable[[str], str] = str
    ) -> dict[str, Any]:
        """Every option of its ``sample``, those given checked as :meth:`checked_request`
        checks predict's (None: the declared default). RequestError otherwise."""
        if not self.samples:
            raise RequestError(f"{self.description} does not sample text")
        declared = {o.name: o for o in self.sample_options}
        unknown = sorted(options.keys() - declared.keys())
        if unknown:
            offered = ", ".join(spelled(o) for o in declared)
            raise RequestError(
                f"{spelled(unknown[0])} is not an option of sampling (its options: {offered})"
            )
        chosen = {name: option.default for name, option in declared.items()}
        for name, value in options.items():
            if value is not None:
                chosen[name] = declared[name].checked(value, spelled(name))
        return chosen

    def offers(self, option: str) -> bool:
        """Whether its ``predict`` takes the option named ``option``."""
        return any(o.name == option for o in self.predict_options)

    def checked_request(
        self, fmt: str | None, options: dict[str, Any], spelled: Callable[[str], str] = str
    ) -> tuple[str, dict[str, Any]]:
        """The output format (None: the kind's default) and the options (``predict``'s
        keywords) of a prediction request, checked: the format is one the kind writes, each
        option one it takes, in range, carried by that format; an option at its default is
        left out. RequestError otherwise, naming each as ``spelled`` does (``--top-k`` on the
        command line, ``top_k`` in a request body). The command line, the server, corpus
        prediction and the Ray step all ask this."""
        if not self.predict_formats:
            instead = "; use bistack sample" if self.samples else ""
            raise RequestError(f"{self.description} predicts no labels{instead}")
        fmt = fmt or self.predict_formats[0]
        if fmt not in self.predict_formats:
            writes = " or ".join(self.predict_formats)
            raise RequestError(
                f"{spelled('format')} {fmt} is not for {self.description}; it writes {writes}"
            )
        declared = {o.name: o for o in self.predict_options}
        chosen = {}
        for name, value in options.items():
            if name not in declared:
                offered = ", ".join(spelled(o) for o in declared) or "none"
                raise RequestError(
                    f"{spelled(name)} is not an option of {self.description} "
                    f"(its options: {offered})"
                )
            option = declared[name]
            if option.asks_nothing(value):
                continue
            chosen[name] = option.checked(value, spelled(name))
            if not option.carried_by(fmt):
                carriers = " or ".join(f"{spelled('format')} {f}" for f in option.formats)
                raise RequestError(
                    f"{spelled(name)} is not carried by {spelled('format')} {fmt}; use {carriers}"
                )
        return fmt, chosen

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
        return None if self.exporting is None else resolve(self.exporting.plan)

    @property
    def shared_export_plans(self) -> Any:
        shared = None if self.exporting is None else self.exporting.shared
        return None if shared is None else resolve(shared)

    @property
    def report_builder(self) -> Any:
        return None if self.report is None else resolve(self.report)

    @property
    def ensemble_class(self) -> Any:
        validating = self.cross_validating
        return None if validating is None else resolve(validating.ensemble)

    @property
    def fold_family(self) -> Any:
        """Its fold family's class (``type[FoldFamily[...]]``), or None: not cross-validated."""
        validating = self.cross_validating
        return None if validating is None else resolve(validating.family)

    @property
    def blend_part(self) -> Any:
        """What reads its CVs for a blend (a ``BlendPart`` class), or None: not blended."""
        blend = None if self.cross_validating is None else self.cross_validating.blend
        return None if blend is None else resolve(blend)

    @property
    def runtime_class(self) -> Any:
        return None if self.exporting is None else resolve(self.exporting.runtime)
