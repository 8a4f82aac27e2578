"""The one door into a trained model: :func:`open_model` opens a model directory (onto a device,
at a precision) or a directory ``bistack export`` wrote (on onnxruntime), reading each of its
files once and checking there what the request asks of it, and hands back a :class:`Predictor`
that every outlet uses alike: predict, evaluate, info, serve, corpus prediction, the Ray step,
export, ``explain`` and the Python API. Nothing past this door asks whether a model was
exported; the predictor says it where a message needs it.

A :class:`Predictor` predicts values (``predict``) and records (``predict_records``: ids,
options and an output format, each record's outcome apart, so that corpus prediction and the
Ray step stream records through it), scores labelled data, describes itself and samples, as
its kind's card declares.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bistack.cards import Card, RequestError
from bistack.config.hub import local_folder
from bistack.errors import BistackError, ConfigError, ModelFileError
from bistack.files.ensemble_dir import EnsembleMeta, is_ensemble, read_ensemble
from bistack.files.modeldir import WEIGHTS, read_config, reading_model
from bistack.files.onnx_session import EXPORT_FILE, MODEL_FILE, STAGES, is_exported, read_export
from bistack.inputs import Input, Record, described, length_problem, unicode_problem
from bistack.models.precision import InferencePrecision, autocast_for
from bistack.tasks import TASKS, Report


@dataclass(frozen=True)
class ModelSource:
    """Where a model is and how to run it: a model or exported directory, the device a PyTorch
    model runs on, the threads of an exported model's session (None: one per core) and the
    precision of a PyTorch model's passes. Plain data: worker processes and Ray actors each open
    their own copy from it."""

    path: str
    device: str = "cpu"
    threads: int | None = None
    precision: InferencePrecision = "32"

    def open(self) -> Predictor:
        return open_model(self.path, self.device, self.threads, self.precision)


@dataclass(frozen=True)
class ModelFiles:
    """A model's directory as read at the door: its metadata (config.json, export.json of an
    exported directory, or ensemble.json of an ensemble of fold models) and the kind it
    names."""

    path: Path
    meta: dict[str, Any]
    exported: bool
    ensemble: EnsembleMeta | None = None  # an ensemble's or a blend's ensemble.json

    @property
    def kind(self) -> str:
        return str(self.meta["kind"])

    @property
    def card(self) -> Card:
        """The kind's card; a kind this bistack does not know is an error naming the known."""
        if self.kind not in TASKS:
            raise ModelFileError(
                f"{self.path}: holds a model of kind {self.kind!r}, which this bistack does not "
                f"know (known: {', '.join(sorted(TASKS))})"
            )
        return TASKS[self.kind]


def read_model_files(path: str | Path) -> ModelFiles:
    """The metadata of the model directory or exported directory at ``path`` (or of a
    HuggingFace hub id's snapshot: ``bistack.config.hub``), read once."""
    path = local_folder(path)
    if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):  # else "missing config.json"
        raise ModelFileError(f"{path}: this user may not read the model folder (permission denied)")
    if is_exported(path):
        return ModelFiles(Path(path), read_export(path), exported=True)
    if is_ensemble(path):
        ensemble = read_ensemble(path)
        exported = ensemble.exported
        kinds = ensemble.member_kinds()
        for folder in ensemble.member_paths(path):  # of the kind the ensemble says (its run's)
            kind = (read_export(folder) if exported else read_config(folder))["kind"]
            if kind != kinds[folder.name]:
                raise ModelFileError(
                    f"{path}: an ensemble of {kinds[folder.name]} models, but member "
                    f"{folder.name} holds a {kind} model; an ensemble's members are of one kind"
                )
        return ModelFiles(Path(path), ensemble.values, exported, ensemble)
    return ModelFiles(Path(path), read_config(path), exported=False)


def card_of(path: str | Path) -> Card:
    """The card of the kind a model directory or an exported directory holds."""
    return read_model_files(path).card


@dataclass(frozen=True)
class Failed:
    """Why a record has no prediction."""

    reason: str


Outcome = str | Failed  # a record's formatted prediction, or why it has none


@dataclass
class Predictor:
    """A model behind the door: its card, the model (PyTorch, or an exported one on
    onnxruntime: both predict, score and describe themselves alike), its files and how it
    runs (``source``)."""

    card: Card
    model: Any
    files: ModelFiles
    source: ModelSource = field(repr=False)

    @property
    def path(self) -> Path:
        return self.files.path

    @property
    def description(self) -> str:
        exported = " (exported)" if self.files.exported else ""
        if self.files.ensemble:
            held = self.files.ensemble.description()
            kinds = dict.fromkeys(self.files.ensemble.member_kinds().values())
            each = " or ".join(TASKS[kind].description for kind in kinds)
            return f"{held}, each {each}{exported}"
        return f"{self.card.description}{exported}"

    def input_of(self, value: Any) -> Input:
        """The card's input that takes ``value``; ValueError saying what it takes otherwise."""
        chosen = self.card.input_of(value)
        if chosen is None:
            raise ValueError(
                f"{self.description} predicts from {described(self.card.inputs)}, "
                f"not {type(value).__name__} {value!r:.60}"
            )
        return chosen

    def running(self) -> Any:
        """The context every pass runs in: autocast at the source's precision."""
        return autocast_for(self.source.device, self.source.precision)

    def predict(self, values: Sequence[Any], **options: Any) -> list[Any]:
        """Predictions of ``values``, all of one input (``input_of``), in order."""
        if not values:
            return []
        chosen = self.input_of(values[0])
        for index, value in enumerate(values):
            if self.input_of(value) is not chosen:
                raise ValueError(f"mixed inputs in one call: {chosen.description} and another")
            texts = isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(t, str) for t in value)
            )
            problem = length_problem(value) if texts else None
            problem = problem or unicode_problem(value)
            if problem is not None:
                raise ValueError(f"input {index}: {problem}")
        with self.running():
            return list(chosen.predict(self.model, [chosen.read(v) for v in values], **options))

    def output_head(self, fmt: str, id_field: str | None, options: dict[str, Any]) -> str:
        """The first line of output format ``fmt`` for this model's predictions with
        ``options`` (a table's columns; "" for a format that has none)."""
        return self.card.output_format(fmt).lines(self.model, id_field, options)[0]

    def predict_records(
        self,
        records: Sequence[Record],
        fmt: str,
        options: dict[str, Any] | None = None,
        keeps_place: bool = False,
        id_field: str | None = None,
    ) -> list[Outcome]:
        """Each record's prediction written in the output format ``fmt`` (with ``options``, as
        the card checked them), or why it has none, in order. Records are predicted together
        by the input of the card that takes them (texts, token lists...), and each batch
        alone: a record predicts the same whatever its neighbours, so a resumed run writes
        each chunk's bytes as the first run did. ``keeps_place``: each prediction carries its
        record's line or row and id (``id_field``, records of an --input file)."""
        from bistack.models.spelling_cache import each_batch_alone

        options = options or {}
        written = self.card.output_format(fmt).lines(self.model, id_field, options)[1]
        writers = {o.name for o in self.card.predict_options if o.for_writer}
        options = {name: value for name, value in options.items() if name not in writers}
        outcomes: list[Outcome] = [Failed(r.error) if r.error is not None else "" for r in records]
        groups: dict[str, tuple[Input, list[int]]] = {}
        values: dict[int, Any] = {}  # each record's value as its input reads it
        for index, record in enumerate(records):
            if record.error is not None:
                continue
            try:
                chosen, values[index] = self._read(record)
            except ValueError as error:
                outcomes[index] = Failed(str(error))
                continue
            groups.setdefault(chosen.name, (chosen, []))[1].append(index)

        def write(index: int, prediction: Any) -> str:
            extra = {**records[index].where, **records[index].ids} if keeps_place else {}
            return written(prediction, extra)

        def predict(chosen: Input, indices: list[int]) -> list[Any]:
            return list(chosen.predict(self.model, [values[i] for i in indices], **options))

        with each_batch_alone(), self.running():
            for chosen, indices in groups.values():
                try:
                    for i, prediction in zip(indices, predict(chosen, indices), strict=True):
                        outcomes[i] = write(i, prediction)
                except (BistackError, ValueError, RuntimeError):
                    for i in indices:  # find the record at fault
                        try:
                            outcomes[i] = write(i, predict(chosen, [i])[0])
                        except (BistackError, ValueError, RuntimeError) as error:
                            outcomes[i] = Failed(str(error) or type(error).__name__)
        return outcomes

    def _read(self, record: Record) -> tuple[Input, Any]:
        """The input that takes a record's value, and the value as it reads it; ValueError
        saying why not."""
        value = record.value
        chosen = self.card.input_of(value)
        if chosen is None:
            shown = "null" if value is None else type(value).__name__
            if self.card.takes("tokens") or not isinstance(value, list):
                raise ValueError(f"{record.what} is {shown}, not {described(self.card.inputs)}")
            raise ValueError(
                f"{record.what} is a list of tokens, which only a tagger takes; give a text"
            )
        problem = length_problem(value) or unicode_problem(value)  # the cheap check first
        if problem is not None:
            raise ValueError(f"{record.what}: {problem}")
        return chosen, chosen.read(value)

    def evaluate(self, path: str | Path) -> Report:
        with self.running():
            return self.model.evaluate(path)

    def sample(self, prompt: str, **options: Any) -> list[str]:
        """A continuation of ``prompt``, token by token, with the options of the card's
        ``sample`` (checked there; unset ones at their defaults)."""
        chosen = self.card.checked_sample(options)
        problem = unicode_problem(prompt) if isinstance(prompt, str) else "not a string"
        if problem is not None:
            raise RequestError(f"prompt: {problem}")
        with self.running():
            return list(
                self.model.sample(prompt, chosen["tokens"], chosen["temperature"], chosen["seed"])
            )

    def streamer(self) -> Any:
        """What tags tokens as they arrive (``predict --stream``); an error where it cannot."""
        if self.files.exported:
            raise ConfigError(f"{self.path} is an exported model, which cannot stream")
        if not self.card.streams:
            kinds = ", ".join(kind for kind, card in TASKS.items() if card.streams)
            raise ConfigError(
                f"{self.path} holds {self.card.description}, which does not stream (a kind that "
                f"streams: {kinds})"
            )
        return self.model.streamer()

    def export_plans(self) -> list[tuple[Path, Any, Any, Card]]:
        """What ``bistack export`` traces: the folder, the loaded model, its kind's export
        plan and card, of each model it holds (itself, or each ensemble member as the ensemble
        opened it, never opened again); an error where a kind has none, or the model is an
        export already."""
        if self.files.exported:
            raise ConfigError(
                f"{self.path} is an exported model already; export its model directory"
            )
        ensemble = self.files.ensemble
        if ensemble is None:
            return [(self.path, self.model, *exported_as(self.card, self.model, self.path))]
        kinds = ensemble.member_kinds()
        folders = ensemble.member_paths(self.path)
        return [
            (folder, member, *exported_as(TASKS[kinds[folder.name]], member, self.path))
            for folder, member in zip(folders, self.model.members, strict=True)
        ]

    def info(self) -> dict[str, Any]:
        """Kind, what it predicts, its training config's summary and data, its size and the
        bistack that wrote it (``GET /info``, ``bistack info``)."""
        config = self.model.config
        data = config.to_dict()
        info = {
            "kind": self.card.kind,
            "description": self.description,
            "exported": self.files.exported,
        }
        info |= self.model.describe()
        info["inputs"] = [i.name for i in self.card.inputs]
        info["config"] = {key: data[key] for key in config.SUMMARY_KEYS if key in data}
        info["trained_on"] = {k: data.get("data", {}).get(k) for k in ("train", "dev")}
        info["bistack_version"] = self.files.meta.get("bistack_version")
        info |= self.size()
        return info

    def size(self) -> dict[str, int | None]:
        """How many numbers its weights hold (from the safetensors headers alone), or the
        bytes of an exported graph."""
        ensemble = self.files.ensemble
        folders = ensemble.member_paths(self.path) if ensemble else [self.path]
        if self.files.exported:
            graphs = [folder / MODEL_FILE for folder in folders]
            graphs += sorted((self.path / STAGES).glob(f"*/{MODEL_FILE}"))  # shared backbones
            sizes = [graph.stat().st_size for graph in graphs if graph.exists()]
            return {"graph_bytes": sum(sizes) if sizes else None}
        files = [
            file
            for folder in folders
            for file in [folder / WEIGHTS, *sorted((folder / "backbone").glob("*.safetensors"))]
        ]
        return {"parameters": parameters_in([f for f in files if f.is_file()])}


def exported_as(card: Card, model: Any, path: Path) -> tuple[Any, Card]:
    """``model``'s export plan by its kind's ``card``, and the card; an error where the kind
    has none."""
    if card.export_plan is None:
        kinds = ", ".join(kind for kind, c in TASKS.items() if c.exporting is not None)
        raise ConfigError(
            f"{path} holds {card.description}, which bistack export does not cover (the kinds "
            f"it exports: {kinds})"
        )
    return card.export_plan(model), card


def parameters_in(files: Sequence[Path]) -> int | None:
    """How many numbers the safetensors ``files`` hold, read from their headers alone."""
    import json

    if not files:
        return None
    total = 0
    for file in files:
        with file.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(size))
        for name, entry in header.items():
            if name != "__metadata__":
                count = 1
                for dim in entry["shape"]:
                    count *= dim
                total += count
    return total


def open_model(
    path: str | Path,
    device: str = "cpu",
    threads: int | None = None,
    precision: InferencePrecision = "32",
) -> Predictor:
    """Open a model directory (onto ``device``, its passes at ``precision``) or a directory
    ``bistack export`` wrote (on onnxruntime's CPU provider with ``threads`` threads: None, one
    per core), whichever ``path`` is, each file read once; no unpickling either way. What an
    exported model cannot do (another device, mixed precision) is refused here."""
    source = ModelSource(str(path), device, threads, precision)
    files = read_model_files(path)
    card, path = files.card, files.path
    if files.exported:
        refuse_for_exported(path, device, precision)
        if card.runtime_class is None:
            raise ModelFileError(f"{path}: holds {card.description}, which has no exported runtime")
    opener = member_opener(card, files.exported, device, threads)
    if files.ensemble:
        opener = kinds_opener(files.ensemble.member_kinds(), files.exported, device, threads)
        if card.ensemble_class is None:
            raise ModelFileError(f"{path}: {card.description} has no ensembles in this bistack")
        with reading_model(path, "ensemble.json or a member's files"):
            model = card.ensemble_class.open(path, files.ensemble, opener)
        return Predictor(card, model, files, source)
    return Predictor(card, opener(path, {}, files.meta), files, source)


def member_opener(card: Card, exported: bool, device: str, threads: int | None) -> Any:
    """What opens one model folder of ``card``'s kind, as the door opens it:
    ``open(folder, shared, meta=None)`` (``shared``: parts another member holds, such as a
    frozen backbone; ``meta``: its metadata when already read)."""
    if not exported:
        from bistack.models.saved import opening

        loader = card.loader_class

        def open_saved(folder: Path, shared: dict[str, Any], meta: Any = None) -> Any:
            meta = meta if meta is not None else read_config(folder)
            with opening(folder, card.kind, loader.CONFIG, device, meta=meta) as saved:
                return loader.from_saved(saved, **shared)

        return open_saved
    from bistack.files.onnx_session import ExportedFiles

    runtime = card.runtime_class

    def open_exported(folder: Path, shared: dict[str, Any], meta: Any = None) -> Any:
        meta = meta if meta is not None else read_export(folder)
        with reading_model(folder, EXPORT_FILE):  # shared: another member's backbone graph
            return runtime(ExportedFiles(folder, runtime.CONFIG, threads, meta=meta), **shared)

    return open_exported


def kinds_opener(kinds: dict[str, str], exported: bool, device: str, threads: int | None) -> Any:
    """What opens an ensemble's member folders, each by the opener of its kind (``kinds``, by
    folder name: a blend's runs may be of different kinds)."""
    openers = {
        kind: member_opener(TASKS[kind], exported, device, threads)
        for kind in dict.fromkeys(kinds.values())
    }

    def open_member(folder: Path, shared: dict[str, Any], meta: Any = None) -> Any:
        return openers[kinds[folder.name]](folder, shared, meta)

    return open_member


def refuse_unmet_precision(opened: Predictor, asked: InferencePrecision | None) -> None:
    """``--precision 32`` asked of a PyTorch model whose frozen backbone reads texts in
    bfloat16 (its ``backbone.precision``, as it was trained and as its cached vectors were
    computed): refused, naming the key, rather than ignored (None: as trained, needs
    nothing; an exported graph runs in float32 whatever the model trained at)."""
    frozen = opened.model.config.frozen_backbone
    if asked != "32" or frozen is None or frozen.precision == "32" or opened.files.exported:
        return
    raise ConfigError(
        f"--precision 32: {opened.path} reads texts through its frozen backbone in "
        f"{frozen.precision} (backbone.precision, as it was trained), and its head in 32-bit; "
        "leave out --precision to predict as it was trained, or train it with --set "
        "backbone.precision=32"
    )


def refuse_for_exported(path: Path, device: str, precision: str) -> None:
    """What an exported model cannot do: another device than onnxruntime's CPU provider, or
    mixed precision; refused here, at the door."""
    if device != "cpu":
        raise ConfigError(
            f"--device {device}: an exported model runs on onnxruntime's CPU provider; "
            "predict with the PyTorch model directory to use another device"
        )
    if precision != "32":
        raise ConfigError(
            f"--precision {precision}: {path} is an exported model, which runs its graph in "
            "float32 on onnxruntime; give the PyTorch model directory for mixed precision"
        )


def load_model(path: str | Path, device: str = "cpu") -> Any:
    """The PyTorch model a model directory holds, whichever its kind (no unpickling)."""
    return open_model(path, device).model
