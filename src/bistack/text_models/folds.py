"""What cross-validation (``bistack.cv``) does with a table of texts:
split it by class or binned target (or by ``data.group_column``), train each fold on its rows
(a frozen backbone's per-layer vectors computed once for the whole table), keep each fold's
probabilities or values on its held-out rows, pool them into the out-of-fold predictions
(written as ``predict`` writes a prediction) and score them with the kind's metric."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Self

import numpy as np

from bistack.data.splits import split_off_dev
from bistack.data.tables import Example, read_table
from bistack.errors import ConfigError
from bistack.files.formats import table_line
from bistack.files.modeldir import atomic_write
from bistack.folds.contract import (
    JSON,
    EnsembleFit,
    FoldFamily,
    FoldResult,
    HeldOut,
    OpenModel,
    OutOfFold,
    Say,
)
from bistack.folds.plan import FoldPlan
from bistack.folds.settings import CVSettings
from bistack.folds.splitters import SplitKeys
from bistack.text_models.base import TextModelBase
from bistack.text_models.config import LayerPoolingTextConfig, TextModelConfig
from bistack.text_models.outputs import ClassOutputs, RawOutputs, TargetOutputs
from bistack.text_models.recipe import TextData

if TYPE_CHECKING:
    from bistack.cards import Card
    from bistack.models.backbone import TransformerBackbone
    from bistack.text_models.layer_recipe import VectorsByExample

# The fields an out-of-fold record has besides the prediction's own (which an id may not take).
OOF_FIELDS = ("row", "fold", "gold", "text", "label", "probabilities", "values", "attention")
TextConfig = TextModelConfig | LayerPoolingTextConfig


@dataclass(frozen=True)
class TextHeldOut:
    """A fold model's held-out outputs: each row's probabilities of ``labels`` (the classes
    its training folds had) or values of the targets, ``(rows, outputs)``."""

    outputs: list[list[float]]
    labels: list[str]

    def to_json(self) -> JSON:
        return {"outputs": self.outputs, "labels": self.labels}


@dataclass(frozen=True)
class TextShared:
    """What every fold of a model over a frozen backbone shares: the backbone, and its
    per-layer vectors of every row of the table (none for a recurrent model, or a fine-tuned
    backbone)."""

    backbone: TransformerBackbone | None = None
    vectors_of: VectorsByExample | None = None


TextFold = FoldResult[TextHeldOut]


class TextFolds:
    """Cross-validation of a classifier's or regressor's ``config``, of the kind ``card``
    names (its model class says what its outputs are)."""

    OOF_FILES: ClassVar[tuple[str, ...]] = ("oof.jsonl", "oof.csv")
    FOLD_FILES: ClassVar[tuple[str, ...]] = ()
    ROWS_ARE: ClassVar[str] = "rows"

    @classmethod
    def of(cls, config: TextConfig, card: Card, open_model: OpenModel) -> Self:
        """The family of ``config`` (its card chose the class: a layer model's shares its
        backbone's vectors; its fold models open by their card's loader, not ``open_model``:
        they run on the CV's rows as trained)."""
        return cls(config, card)

    def __init__(self, config: TextConfig, card: Card) -> None:
        self.config = config
        self.card = card
        data = config.data
        rows = read_table(data.train, data.text_column, data.label_columns, file_format=data.format)
        self.trained_rows = len(rows)  # the training table's; a dev table's follow (dev split)
        if data.dev:
            rows += read_table(
                data.dev, data.text_column, data.label_columns, file_format=data.format
            )
        self.rows = rows
        # What the out-of-fold predictions are: every class of the table, or its targets in
        # original units; every row's label checked now (an error naming a bad one's row).
        kind: type[ClassOutputs] | type[TargetOutputs] = card.loader_class.OUTPUTS
        self.outputs = kind.for_table(rows, data.label_columns, data.train)
        self.ids = self.column(data.id_column) if data.id_column else None
        if data.id_column in OOF_FIELDS:
            raise ConfigError(
                f"data.id_column {data.id_column!r}: the out-of-fold files have a field of that "
                "name already; name another column"
            )

    def column(self, name: str) -> list[str]:
        """Each row's value of the table's column ``name`` (an error naming a missing one),
        the dev table's after the training table's where there is one."""
        data = self.config.data
        tables = [data.train, data.dev] if data.dev else [data.train]
        found = [
            read_table(path, data.text_column, [name], file_format=data.format) for path in tables
        ]
        return [e.labels[0] for table in found for e in table]

    def row_content(self, row: int) -> list[object]:
        example = self.rows[row]
        return [example.text, list(example.labels)]

    def split_keys(self) -> SplitKeys:
        """What the rows are split by: ``data.fold_column``'s folds as given; else the classes
        or binned first target, with ``data.group_column``'s groups kept whole when the
        config names one."""
        data = self.config.data
        if data.dev:  # the dev split's: the dev table's rows held out
            dev_rows = list(range(self.trained_rows, len(self.rows)))
            return {"rows": len(self.rows), "dev_rows": dev_rows, "dev_is": f"data.dev {data.dev}"}
        if data.fold_column:
            given: SplitKeys = {
                "rows": len(self.rows),
                "fold_column": self.column(data.fold_column),
                "fold_column_name": f"column {data.fold_column!r}",
            }
            if data.group_column:  # checked to lie whole in the given folds
                given["groups"] = self.column(data.group_column)
                given["grouped_by"] = f"column {data.group_column!r}"
            return given
        keys = self.outputs.split_keys(self.rows, data.label_columns, data.train)
        if data.group_column:
            keys["groups"] = self.column(data.group_column)
            keys["grouped_by"] = f"column {data.group_column!r}"
        if data.order_column:  # read by --split time
            keys["order"] = self.column(data.order_column)
            keys["ordered_by"] = f"column {data.order_column!r}"
            if data.order_format:
                keys["order_format"] = data.order_format
        # The dev split without a dev table: the share of the table a run holds out for dev.
        _, dev_rows = split_off_dev(range(len(self.rows)), data.dev_fraction, data.split_seed)
        keys["dev_rows"] = dev_rows
        keys["dev_is"] = f"{data.dev_fraction:.0%} of data.train"
        return keys

    def refuse_settings(self, settings: CVSettings) -> None:
        """A split that could not act: ``--split plain`` or ``time`` where
        ``data.fold_column`` gives the folds; a time split of groups (kept whole, they would
        straddle the blocks); ``data.order_column`` without a time split."""
        data = self.config.data
        if settings.split != "auto" and data.fold_column:
            raise ConfigError(
                f"--split {settings.split} deals the folds, and data.fold_column "
                f"{data.fold_column!r} gives them: give one of the two"
            )
        if settings.split == "time" and data.group_column:
            raise ConfigError(
                f"--split time cuts the rows into blocks in time, and data.group_column "
                f"{data.group_column!r} keeps each group whole in one fold: give one of the two"
            )
        if data.order_format and not data.order_column:
            raise ConfigError(
                f"data.order_format {data.order_format!r} says how data.order_column writes its "
                "dates, and no data.order_column is given: name the column, or leave it out"
            )
        if data.order_column and settings.split != "time":
            raise ConfigError(
                f"data.order_column {data.order_column!r} orders the rows of a time split: "
                "give --split time, or leave it out"
            )

    def shared_inputs(self, say: Say) -> TextShared:
        """What every fold of a recurrent model shares: nothing (a model over a transformer's
        layers shares its frozen backbone's vectors: :class:`LayerTextFolds`)."""
        return TextShared()

    def training_inputs(
        self,
        train: list[int],
        dev: list[int],
        source: str,
        shared: TextShared,
        calibrate_on_dev: bool,
    ) -> dict[str, object]:
        """The fold's inputs to the kind's recipe: its rows, and what the folds share."""
        rows = self.rows
        data = TextData([rows[i] for i in train], [rows[i] for i in dev], source, calibrate_on_dev)
        if shared.backbone is None:
            return {"data": data}
        return {"data": data, "backbone": shared.backbone, "vectors_of": shared.vectors_of}

    @staticmethod
    def model_parts(shared: TextShared) -> dict[str, object]:
        """What the fold's model opens with (the shared frozen backbone)."""
        return {} if shared.backbone is None else {"backbone": shared.backbone}

    def predict_held_out(
        self, model: TextModelBase, held: list[int], shared: TextShared, key: str, directory: Path
    ) -> HeldOut[TextHeldOut]:
        """The fold model's probabilities or values on its held-out rows, and its scores (all
        in the record: ``directory`` keeps nothing more)."""
        examples = [self.rows[i] for i in held]
        texts = [e.text for e in examples]
        if shared.vectors_of is not None:
            raw = model.run_after(shared.vectors_of(examples), texts)
        else:
            raw = model.run(texts)
        scores = model.metrics(examples, raw, self.config.data.train)
        outputs = TextHeldOut(model.outputs.averaged(raw).tolist(), model.outputs.names)
        return HeldOut(scores[key], scores.to_json(), outputs)

    @staticmethod
    def read_predictions(fields: JSON) -> TextHeldOut:
        """A fold's held-out outputs as ``fold.json`` holds them."""
        outputs, labels = fields["outputs"], fields["labels"]
        if not isinstance(outputs, list) or not isinstance(labels, list):
            raise TypeError("outputs and labels: not lists")
        return TextHeldOut(outputs, labels)

    def pool_out_of_fold(
        self, plan: FoldPlan, records: list[TextFold], key: str
    ) -> OutOfFold[np.ndarray]:
        """The kind's metric on each repeat's pooled out-of-fold predictions, and each
        repeat's predictions of every row, ``(repeats, rows, outputs)``."""
        outputs, path = self.outputs, self.config.data.train
        shape = (len(self.rows), len(outputs))
        # A row no fold held out (a time split's first block) stays NaN: it has no prediction.
        per_repeat = [np.full(shape, np.nan, dtype=np.float32) for _ in range(plan.repeats)]
        for (repeat, fold, _), record in zip(plan.runs(), records, strict=True):
            per_repeat[repeat][plan.held_out(repeat, fold)] = held_outputs(record, outputs)
        scores = []
        for repeat, values in enumerate(per_repeat):  # over the rows some fold held out
            held = plan.held_rows(repeat)
            chosen = [self.rows[i] for i in held]
            scores.append(float(outputs.scores(chosen, outputs.as_raw(values[held]), path)[key]))
        return OutOfFold(scores, np.stack(per_repeat))

    def cross_fit(
        self, plan: FoldPlan, records: list[TextFold], key: str, members: dict[str, Path], say: Say
    ) -> list[TextFold]:
        """Each fold's held-out outputs calibrated as a model is after training (a
        classifier's temperature; a regressor's scale and offset, with
        ``regression.calibrate``), the fit made on the other folds' out-of-fold outputs of its
        repeat and never on its own rows; its scores again. ``records``: uncalibrated."""
        if not self.calibrates:
            return records
        path, runs = self.config.data.train, plan.runs()
        fitted = []
        for (repeat, fold, _), record in zip(runs, records, strict=True):
            partners = plan.calibrated_by(repeat, fold)
            others = [
                (plan.held_out(repeat, f), other)
                for (r, f, _), other in zip(runs, records, strict=True)
                if r == repeat and f in partners
            ]
            if not others:  # a time split's first fold: no earlier predictions to fit on
                note = "no earlier fold's out-of-fold predictions to fit on: as trained"
                fitted.append(record.cross_fitted(record.held_out, {"fitted_on": [], "note": note}))
                continue
            outputs = type(self.outputs)(dict(self.outputs.info))
            fit_rows = [self.rows[i] for held, _ in others for i in held]
            values = np.concatenate([held_outputs(other, outputs) for _, other in others])
            done = outputs.fit_on_dev(fit_rows, path, outputs.as_raw(values), True)
            own = outputs.as_raw(held_outputs(record, outputs))
            held = [self.rows[i] for i in record.held]
            scores = outputs.scores(held, own, path)
            kept = {k: outputs.info[k] for k in ("temperature", "calibration") if k in outputs.info}
            fitted_on = [name for (r, f, name) in runs if r == repeat and f in partners]
            predictions = TextHeldOut(outputs.averaged(own).tolist(), outputs.names)
            calibration: JSON = kept | {"fitted_on": fitted_on} | ({} if kept else {"note": done})
            held_out = HeldOut(scores[key], scores.to_json(), predictions)
            fitted.append(record.cross_fitted(held_out, calibration))
        return fitted

    @property
    def calibrates(self) -> bool:
        """Whether a model of this config calibrates its outputs after training (a
        classifier always; a regressor with ``regression.calibrate``)."""
        return self.outputs.calibrates(self.config)

    def ensemble_settings(
        self,
        fitted_on: np.ndarray,
        written: np.ndarray,
        members: dict[str, Path],
        records: list[TextFold],
        say: Say,
        members_calibrated: bool,
    ) -> EnsembleFit[np.ndarray]:
        """What the ensemble keeps of the OOF predictions (``fitted_on``: as the members give
        them; of the rows ``records``, its members, held out), and what was done: a
        classifier's temperature; a regressor's scale and offset per target, with
        ``regression.calibrate``, where the members are uncalibrated. ``written`` gains
        nothing."""
        refit = not members_calibrated and self.calibrates
        mean = fitted_on.mean(axis=0)  # the ensemble averages every repeat's members
        held = sorted({row for record in records for row in record.held})  # its members' own
        rows = [self.rows[i] for i in held]
        meta, note = self.outputs.ensemble_fit(rows, self.config.data.train, mean[held], refit)
        return EnsembleFit(meta, note, written)

    def write_oof(self, output: Path, plan: FoldPlan, oof: np.ndarray) -> list[str]:
        """``oof.jsonl`` (each row's prediction as ``predict`` writes it, after its row
        number, its id with ``data.id_column``, its fold and gold value) and ``oof.csv`` (the
        same as columns), every row some fold held out once (every row, but for a time split's
        first block), in the table's order. ``oof``: each repeat's
        predictions ``(repeats, rows, outputs)``; with repeats, each repeat has its fold
        column and its prediction columns (``label_repeat1``...), and a JSON line holds the
        repeats' mean prediction with each repeat's under ``repeats``: the CV's score is the
        mean of the repeats' scores, each recomputed from its own columns."""
        outputs = self.outputs
        held = [row for row in range(len(self.rows)) if any(a[row] >= 0 for a in plan.assignments)]
        rows, texts = [self.rows[i] for i in held], [self.rows[i].text for i in held]
        oof = oof[:, held]
        each = [outputs.predictions(texts, outputs.as_raw(o), False) for o in oof]
        mean = (  # one repeat: its predictions are the mean's, not made twice
            each[0]
            if len(oof) == 1
            else outputs.predictions(texts, outputs.as_raw(oof.mean(axis=0)), False)
        )
        writer = self.card.output_format("jsonl")
        id_column = self.config.data.id_column
        repeated = plan.repeats > 1
        suffixes = [f"_repeat{r + 1}" for r in range(plan.repeats)] if repeated else [""]
        gold_columns = outputs.oof_columns()[: outputs.gold_columns]
        predicted = outputs.oof_columns()[outputs.gold_columns :]
        head = [
            "row",
            *([id_column] if id_column else []),
            *(f"fold{suffix}" for suffix in suffixes),
            *gold_columns,
            *(f"{column}{suffix}" for suffix in suffixes for column in predicted),
        ]
        lines, table = [], [table_line(head)]
        for index, (row, example) in enumerate(zip(held, rows, strict=True)):
            folds = [assigned[row] for assigned in plan.assignments]
            fold: int | list[int] = folds if repeated else folds[0]
            cells = [outputs.oof_cells(example, repeat[index]) for repeat in each]
            gold = cells[0][0]
            named = {id_column: self.ids[row]} if id_column and self.ids is not None else {}
            extra = {"row": example.row, **named, "fold": fold, "gold": gold}
            if repeated:
                extra["repeats"] = [repeat[index].to_json() for repeat in each]
            lines.append(writer.write(mean[index], extra))
            made = [cell for _, cell_row in cells for cell in cell_row[outputs.gold_columns :]]
            gold_cells = cells[0][1][: outputs.gold_columns]
            table.append(table_line([example.row, *named.values(), *folds, *gold_cells, *made]))
        text = "".join(lines)
        atomic_write(output / "oof.jsonl", lambda temporary: Path(temporary).write_text(text))
        written = "".join(table)
        atomic_write(output / "oof.csv", lambda temporary: Path(temporary).write_text(written))
        return list(self.OOF_FILES)

    def oof_report(self, oof: np.ndarray, model_dir: Path) -> JSON | None:
        """The kind's report (as ``evaluate --report`` draws it) of the OOF predictions, which
        reads the whole table: none where a fold held out no prediction of some rows (a time
        split's first block)."""
        if np.isnan(oof).any():
            return None
        model = OutOfFoldModel(self.config, self.outputs, self.rows, oof.mean(axis=0))
        return dict(self.card.report_builder(model, self.config.data.train, model_dir))


def held_outputs(record: TextFold, outputs: ClassOutputs | TargetOutputs) -> np.ndarray:
    """A fold's held-out outputs in the columns of the table's classes (a fold may lack one)
    or targets."""
    predicted = record.held_out.predictions
    values = np.asarray(predicted.outputs, dtype=np.float32).reshape(len(record.held), -1)
    return outputs.in_columns(values, predicted.labels)


class OutOfFoldModel(TextModelBase):
    """The out-of-fold predictions as a model of the table's rows, for the kind's report."""

    def __init__(
        self,
        config: TextConfig,
        outputs: ClassOutputs | TargetOutputs,
        rows: list[Example],
        oof: np.ndarray,
    ) -> None:
        self.config = config
        self.outputs = outputs
        self.texts = [e.text for e in rows]
        self.oof = oof

    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        if list(texts) != self.texts:
            raise ValueError("out-of-fold predictions are of the cross-validated table's rows")
        return self.outputs.as_raw(self.oof)


class LayerTextFolds(TextFolds):
    """Cross-validation of a classifier or regressor over a transformer's layers: a frozen
    backbone's per-layer vectors of every row computed once for every fold."""

    def __init__(self, config: LayerPoolingTextConfig, card: Card) -> None:
        super().__init__(config, card)
        self.layer_config = config

    def shared_inputs(self, say: Say) -> TextShared:
        """The backbone, and its per-layer vectors of the whole table (computed once, then
        read from the cache), where the backbone is frozen."""
        options = self.layer_config.frozen_backbone
        if options is None:
            return TextShared()
        from bistack.models.backbone import TransformerBackbone
        from bistack.text_models.layer_recipe import VectorsByExample, frozen_vectors

        backbone = TransformerBackbone.load(options.path)
        vectors = VectorsByExample()
        vectors.add(self.rows, frozen_vectors(backbone, self.layer_config, self.rows, say))
        return TextShared(backbone, vectors)


# The families the text kinds' cards name, held to the contract by the type checker.
Family = FoldFamily[TextHeldOut, TextShared, TextModelBase, np.ndarray]
FAMILY: type[Family] = TextFolds
LAYER_FAMILY: type[Family] = LayerTextFolds
