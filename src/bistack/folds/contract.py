"""What cross-validation asks of a kind's family, and the records they exchange.

A family (a kind's card names its class, ``cv``) reads and checks its rows when built, then
answers the run (:mod:`bistack.cv.run`): what its rows can be split by, what every fold
shares (``S``: a frozen backbone and its vectors of every row), what a fold model (``M``)
predicts of its held-out rows (``P``, kept in the fold's :class:`FoldResult`), how the folds'
predictions pool into the out-of-fold predictions (``O``), and what is written of them. The
records are plain data, written to a fold's ``fold.json`` and read back when a CV resumes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypedDict, TypeVar

if TYPE_CHECKING:
    from bistack.folds.plan import FoldPlan
    from bistack.folds.settings import CVSettings
    from bistack.folds.splitters import SplitKeys

Say = Callable[[str], None]
# Opens a saved fold model as the door does: ``open_model(folder, shared_parts)``.
OpenModel = Callable[[Path, dict[str, object]], Any]
JSON = dict[str, object]  # a JSON object as ``json`` reads and writes it
P = TypeVar("P", bound="Predictions")  # what a fold predicts of its held-out rows
S = TypeVar("S")  # what every fold shares
M = TypeVar("M", contravariant=True)  # a fold's model, as the door opens it
Pooled = TypeVar("Pooled")  # the out-of-fold predictions, pooled


class CVSummary(TypedDict):
    """``cv.json``: the metric, the CV score (the mean of each repeat's, on its pooled
    out-of-fold predictions), each fold's score and how it was scored, their mean and spread,
    how many rows and how many of them the score covers (a time split's first block is held out
    by no fold), how they were split, how the folds stopped early and were calibrated, and each
    fold's calibration."""

    metric: str
    cv: float
    cv_per_repeat: list[float]
    folds: dict[str, float]
    folds_scored: str
    fold_mean: float
    fold_std: float
    rows: int
    rows_are: str  # what a row is: a table's row, or a tagger's sentence
    rows_scored: int
    split: str
    early_stopping: str
    calibration: str
    fold_calibration: dict[str, JSON]


class Predictions(Protocol):
    """A fold model's predictions of its held-out rows, as its family keeps them: written into
    ``fold.json`` beside the fold's scores (``to_json``: its fields there, in order)."""

    def to_json(self) -> JSON: ...


@dataclass(frozen=True)
class OutOfFold(Generic[Pooled]):
    """The out-of-fold predictions pooled (``pooled``, as the kind keeps them) and the CV's
    metric on them, one score a repeat (``scores``): what ``pool_out_of_fold`` returns."""

    scores: list[float]
    pooled: Pooled


@dataclass(frozen=True)
class EnsembleFit(Generic[Pooled]):
    """What ``ensemble_settings`` returns: the fold ensemble's settings fitted out of fold
    (``meta``, for ``ensemble.json``), what was done, in words (``note``), and the out-of-fold
    predictions the files and the report are written from (``oof``: the pooled ones, with
    what the fit added to them, such as a tagger's log-potentials)."""

    meta: JSON
    note: str
    oof: Pooled


@dataclass(frozen=True)
class HeldOut(Generic[P]):
    """A fold model's pass over its held-out rows: its ``score`` by the CV's metric, every
    metric it has (``metrics``, as the kind's scores write them) and its ``predictions``."""

    score: float
    metrics: JSON
    predictions: P


@dataclass(frozen=True)
class FoldResult(Generic[P]):
    """One finished fold: its ``name``, the rows it trained on (``train``) and held out
    (``held``), its model's pass over them (``held_out``), its best epoch (and optimizer step,
    with ``train.eval_every``), its trained parameters, the seconds it took (training and the
    held-out pass), its model's digest (``model``: a model changed since is noticed) and,
    once cross-fitted, how its held-out predictions were calibrated (``calibration``)."""

    name: str
    train: list[int]
    held: list[int]
    held_out: HeldOut[P]
    best_epoch: int
    best_step: int | None
    parameters: int
    seconds: float
    model: str
    calibration: JSON | None = None

    # The fields ``fold.json`` holds besides the predictions' own.
    FIELDS: ClassVar[frozenset[str]] = frozenset(
        [
            "name",
            "train",
            "held",
            "score",
            "metrics",
            "best_epoch",
            "best_step",
            "parameters",
            "seconds",
            "model",
        ]
    )

    @property
    def score(self) -> float:
        return self.held_out.score

    def cross_fitted(self, held_out: HeldOut[P], calibration: JSON) -> FoldResult[P]:
        """This fold with its held-out predictions calibrated by a fit on the other folds'."""
        return replace(self, held_out=held_out, calibration=calibration)

    def to_json(self) -> JSON:
        """``fold.json``: the rows, the scores, the predictions, then how it trained."""
        record: JSON = {"name": self.name, "train": self.train, "held": self.held}
        record |= {"score": self.held_out.score, "metrics": self.held_out.metrics}
        record |= self.held_out.predictions.to_json() | {"best_epoch": self.best_epoch}
        if self.best_step:  # train.eval_every: the optimizer step the best validation came
            record["best_step"] = self.best_step
        return record | {
            "parameters": self.parameters,
            "seconds": self.seconds,
            "model": self.model,
        }

    @classmethod
    def from_json(
        cls, record: Mapping[str, object], read: Callable[[JSON], P], source: str
    ) -> FoldResult[P]:
        """A fold as :meth:`to_json` wrote it, its predictions read by ``read`` (from the
        fields that are not :attr:`FIELDS`); a record missing a field is an error naming
        ``source``."""
        from bistack.errors import ConfigError

        try:
            rest = {k: v for k, v in record.items() if k not in cls.FIELDS}
            metrics = record["metrics"]
            if not isinstance(metrics, dict):
                raise TypeError("metrics: not an object")
            step = record.get("best_step")
            return cls(
                str(record["name"]),
                rows_of(record["train"]),
                rows_of(record["held"]),
                HeldOut(number(record["score"]), metrics, read(rest)),
                int(number(record["best_epoch"])),
                None if step is None else int(number(step)),
                int(number(record.get("parameters", 0))),
                number(record.get("seconds", 0.0)),
                str(record["model"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(
                f"{source}: not a fold record bistack wrote ({error}); delete its fold's folder "
                "to train that fold again"
            ) from None


def number(value: object) -> float:
    """A JSON number (a TypeError for anything else)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return float(value)


def rows_of(value: object) -> list[int]:
    """A JSON list of row numbers (a TypeError for anything else)."""
    if not isinstance(value, list) or not all(
        isinstance(row, int) and not isinstance(row, bool) for row in value
    ):
        raise TypeError(f"{str(value)[:40]} is not a list of rows")
    return value


@dataclass(frozen=True)
class Recorded:
    """A fold's predictions as read back where no family reads them (a comparison's table
    needs only the scores): the fields as written."""

    fields: JSON

    def to_json(self) -> JSON:
        return self.fields


class FoldFamily(Protocol[P, S, M, Pooled]):
    """A kind's cross-validation: its ``rows`` (a table's rows, a tagger's sentences: what
    ``ROWS_ARE`` calls them in messages) and what the folds do with them; ``OOF_FILES``: what
    ``write_oof`` writes; ``FOLD_FILES``: what ``predict_held_out`` keeps in a fold's
    folder."""

    OOF_FILES: ClassVar[tuple[str, ...]]
    FOLD_FILES: ClassVar[tuple[str, ...]]
    ROWS_ARE: ClassVar[str]

    @classmethod
    def of(cls, config: Any, card: Any, open_model: OpenModel) -> Self:
        """The family of ``config``, of the kind ``card`` describes, its rows read and
        checked (``open_model``: the door's opener of a saved fold model). Each family module
        ends in its class typed ``type[FoldFamily[...]]``, the card's ``cv``, so that the type
        checker holds it to this contract."""
        ...

    @property
    def rows(self) -> Sequence[object]: ...

    @property
    def calibrates(self) -> bool:
        """Whether a fold model calibrates its outputs after training (so that a fold whose
        dev is its held-out fold is scored cross-fitted, once every fold has finished)."""
        ...

    def split_keys(self) -> SplitKeys:
        """What the rows can be split by (a fold column, groups, classes, targets)."""
        ...

    def row_content(self, row: int) -> list[object]:
        """What row ``row`` holds that a model learns from (its text and targets, a
        sentence's tokens and tags), as plain data: rows alike in it are the same rows,
        whatever other columns the table has."""
        ...

    def refuse_settings(self, settings: CVSettings) -> None:
        """A ConfigError for a setting of ``bistack cv`` this kind cannot act on."""
        ...

    def shared_inputs(self, say: Say) -> S:
        """What every fold shares, made once (a frozen backbone and its vectors)."""
        ...

    def training_inputs(
        self, train: list[int], dev: list[int], source: str, shared: S, calibrate_on_dev: bool
    ) -> dict[str, object]:
        """The keyword arguments of the kind's recipe for one fold's rows (``source``: where
        its dev rows come from, in words)."""
        ...

    def model_parts(self, shared: S) -> dict[str, object]:
        """What a fold's model opens with of the shared inputs (a frozen backbone)."""
        ...

    def predict_held_out(
        self, model: M, held: list[int], shared: S, key: str, directory: Path
    ) -> HeldOut[P]:
        """A fold model's predictions of its held-out rows, and its scores on them (``key``:
        the CV's metric; ``directory``: the fold's folder, for what a family keeps of that
        pass beside its model)."""
        ...

    def read_predictions(self, fields: JSON) -> P:
        """A fold's predictions as ``fold.json`` holds them (``Predictions.to_json``)."""
        ...

    def pool_out_of_fold(
        self, plan: FoldPlan, records: list[FoldResult[P]], key: str
    ) -> OutOfFold[Pooled]:
        """The out-of-fold predictions pooled, and the metric on each repeat's."""
        ...

    def cross_fit(
        self,
        plan: FoldPlan,
        records: list[FoldResult[P]],
        key: str,
        members: dict[str, Path],
        say: Say,
    ) -> list[FoldResult[P]]:
        """Each fold's held-out predictions calibrated by a fit on the other folds'."""
        ...

    def ensemble_settings(
        self,
        fitted_on: Pooled,
        written: Pooled,
        members: dict[str, Path],
        records: list[FoldResult[P]],
        say: Say,
        members_calibrated: bool,
    ) -> EnsembleFit[Pooled]:
        """What the fold ensemble (``members``, of ``records``) keeps of the out-of-fold
        predictions ``fitted_on`` (as the members give them), what was done, and ``written``
        (the out-of-fold predictions to write) with what the fit adds to them."""
        ...

    def write_oof(self, output: Path, plan: FoldPlan, oof: Pooled) -> list[str]:
        """The out-of-fold files (of ``OOF_FILES``) in ``output``; their names."""
        ...

    def oof_report(self, oof: Pooled, model_dir: Path) -> JSON | None:
        """The kind's report of the out-of-fold predictions, where it draws one."""
        ...
