"""The cross-validated runs a blend combines, each read from its ``bistack cv`` output folder
and checked to be blendable with the others: finished, predicting alike (classifiers,
regressors, recurrent or over a transformer's layers, or taggers), over the same rows split the
same way (the same ``folds.json``), with the same labels, targets or tags.

A run's out-of-fold predictions are read by its kind (its card's ``blend``: every row once, in
the table's order, as its fold models predicted them without having seen it); its fold
ensemble is its ``model/``: what the blend's model is made of.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bistack.cards import Card
from bistack.cv.reader import CVFolder
from bistack.errors import ConfigError
from bistack.files.ensemble_dir import EnsembleMeta
from bistack.files.modeldir import read_config
from bistack.folds.blending import BlendPart
from bistack.folds.contract import CVSummary
from bistack.folds.plan import FoldPlan
from bistack.tasks import TASKS, config_from_dict, task_of


@dataclass
class CVRun:
    """One finished CV: its folder and name, kind, fold plan, summary (``cv.json``), fold
    ensemble's metadata, config, and its out-of-fold predictions as its kind reads them
    (``part``)."""

    path: Path
    name: str
    card: Card
    plan: FoldPlan
    summary: CVSummary
    ensemble: EnsembleMeta
    config: dict[str, Any]
    inner_dev: bool  # its folds stopped early on a dev split of their training folds
    part: BlendPart

    @property
    def predictions(self) -> np.ndarray:
        """Its out-of-fold predictions ``(rows, ...)``, every row in the table's order."""
        return self.part.predictions

    @property
    def model(self) -> Path:
        return CVFolder(self.path).model

    def members(self) -> list[Path]:
        """Its fold models' folders, in its ensemble's order."""
        return self.ensemble.member_paths(self.model)

    @property
    def backbone(self) -> str | None:
        """Its frozen backbone's fingerprint (runs with the same one share it in a blend's
        model), or None: it has none, or fine-tunes its own."""
        config = config_from_dict(self.config, str(self.path))
        if config.frozen_backbone is None:
            return None
        meta = read_config(self.members()[0])
        return str(meta.get("backbone", {}).get("fingerprint")) or None


def read_run(path: str | Path, name: str) -> CVRun:
    """The finished CV in ``path``, named ``name`` in the blend; an error naming what is
    missing (a folder that is not a CV's, a CV that has not finished) or what it cannot blend
    (a kind whose CVs are not blended, folds that leave rows out)."""
    folder = CVFolder.finished(path)
    card = task_of(folder.ensemble.kind)
    refuse_kind(card, folder.path)
    config, plan = folder.config, folder.plan
    if len(plan.held_rows(0)) != plan.rows:
        raise ConfigError(
            f"{folder.path}: its folds ({plan.split}) hold out some rows in none of them, and a "
            "blend's weights are fitted, fold by fold, on every row's out-of-fold prediction; "
            "blend cross-validations whose folds hold out every row"
        )
    reader = card.blend_part
    assert reader is not None, "refused above"
    metric = folder.summary["metric"]
    part: BlendPart = reader.read(card, folder.path, config, plan, metric)
    return CVRun(
        folder.path,
        name,
        card,
        plan,
        folder.summary,
        folder.ensemble,
        config,
        folder.inner_dev,
        part,
    )


def refuse_kind(card: Card, path: Path) -> None:
    """A kind whose runs are not blended, refused saying which are."""
    if card.blend_part is None:
        kinds = ", ".join(sorted(k for k, c in TASKS.items() if c.blend_part is not None))
        raise ConfigError(
            f"{path}: holds a CV of {card.description}, which bistack blend does not combine "
            f"(blends take {kinds})"
        )


def run_names(paths: list[Path]) -> list[str]:
    """Each run's name in the blend: its folder's, numbered where two are alike."""
    names: list[str] = []
    for path in paths:
        name, number = path.name, 2
        while name in names:
            name, number = f"{path.name}-{number}", number + 1
        names.append(name)
    return names


def stopping(run: CVRun) -> str:
    """How a run's folds chose their epoch, in words."""
    if run.inner_dev:
        return "on a dev split of their training folds (--inner-dev)"
    return "on their held-out folds (the default)"


def refuse_unlike(runs: list[CVRun]) -> None:
    """Runs that cannot be blended, refused naming what differs from the first. Each run's
    out-of-fold predictions are only comparable, row by row, over one table split one way,
    and their scores only where every run's folds stopped early alike."""
    first = runs[0]
    if len({run.inner_dev for run in runs}) > 1:
        modes = "; ".join(f"{run.path} stopped {stopping(run)}" for run in runs)
        raise ConfigError(
            f"the runs stopped early in two ways ({modes}): a fold that chose its epoch on its "
            "held-out rows scores better there than one that did not, so their CV scores, and "
            "a blend's weights, are not comparable; cross-validate them alike (--inner-dev for "
            "all: a blend's folds should not have chosen anything on the rows they are scored "
            "on)"
        )
    for run in runs[1:]:
        differs = difference(run, first)
        if differs is not None:
            raise ConfigError(
                f"{run.path} cannot be blended with {first.path}: {differs}; a blend's runs "
                "are CVs of classifiers (or of regressors, or of taggers) over the same rows and "
                "folds"
            )


def difference(run: CVRun, first: CVRun) -> str | None:
    """The first way ``run`` differs from ``first`` that a blend cannot take, in words: what
    they predict (classes or values: a recurrent regressor blends with one over a
    transformer's layers), the metric, the rows, the split, the labels or targets; None where
    they blend."""
    if run.part.predicts != first.part.predicts:
        return f"it is a CV of {run.card.description}, not {first.card.description}"
    if run.summary["metric"] != first.summary["metric"]:
        return f"it is scored by {run.summary['metric']}, the first by {first.summary['metric']}"
    if run.plan.rows != first.plan.rows or not same_rows(run.plan, first.plan):
        return (
            f"its rows are another table's ({run.plan.rows} rows of "
            f"{run.config['data']['train']}, digest {run.plan.data[:12]}; the first's: "
            f"{first.plan.rows} of {first.config['data']['train']}, {first.plan.data[:12]})"
        )
    if run.plan.assignments != first.plan.assignments:
        return (
            f"its folds are another split ({run.plan.folds} folds, {run.plan.split}; the "
            f"first's: {first.plan.folds} folds, {first.plan.split}; "
            f"{first_difference(run.plan, first.plan)}); cross-validate it again on the "
            "first's folds (the same --folds, --repeats, --split and data.split_seed, or "
            "data.fold_column)"
        )
    if run.part.names != first.part.names:
        return f"it predicts {', '.join(run.part.names)}, the first {', '.join(first.part.names)}"
    return None


def same_rows(plan: FoldPlan, first: FoldPlan) -> bool:
    """Whether two CVs split the same rows: their texts and targets alike (a column added to
    the table, such as a fold column, changes neither), or, where a plan of an earlier
    version records no such digest, the same table byte for byte."""
    if plan.rows_digest is not None and first.rows_digest is not None:
        return plan.rows_digest == first.rows_digest
    return plan.data == first.data


def first_difference(plan: FoldPlan, first: FoldPlan) -> str:
    """Where two unlike fold plans of the same rows first part, in words."""
    if plan.repeats != first.repeats:
        return f"{plan.repeats} repeats against {first.repeats}"
    repeat, row, fold, other = next(
        (repeat, row, fold, other)
        for repeat, (held, firsts) in enumerate(
            zip(plan.assignments, first.assignments, strict=True)
        )
        for row, (fold, other) in enumerate(zip(held, firsts, strict=True))
        if fold != other
    )
    where = f" of repeat {repeat + 1}" if plan.repeats > 1 else ""
    return f"row {row + 1} is held out by its fold {fold}{where}, by the first's {other}"
