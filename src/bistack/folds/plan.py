"""A cross-validation's plan: the held-out fold of every row, for K folds repeated R times.

A :class:`FoldPlan` is plain data, written to ``folds.json`` so that another run, or another
machine, reuses the same folds exactly. How rows are dealt is a :class:`~bistack.folds.splitters.
Splitter`'s; each repeat deals them with its own seed.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from bistack.data.splits import split_off_dev
from bistack.errors import ConfigError
from bistack.folds.splitters import Splitter


@dataclass(frozen=True)
class FoldPlan:
    """folds, repeats, seed: as asked; split: how rows were dealt, in words; rows: how many;
    data: the digest of the table split; assignments: per repeat, each row's held-out fold."""

    folds: int
    repeats: int
    seed: int
    split: str
    rows: int
    data: str
    assignments: list[list[int]]

    def held_out(self, repeat: int, fold: int) -> list[int]:
        """The rows fold ``fold`` of repeat ``repeat`` holds out, in the table's order."""
        return [row for row, held in enumerate(self.assignments[repeat]) if held == fold]

    def training(self, repeat: int, fold: int) -> list[int]:
        """The rows the model of that fold trains on (every other fold's)."""
        return [row for row, held in enumerate(self.assignments[repeat]) if held != fold]

    def inner_dev(
        self, repeat: int, fold: int, fraction: float, seed: int
    ) -> tuple[list[int], list[int]]:
        """``(train, dev)``: that fold's training rows less an inner dev split of them
        (``fraction`` of them, dealt with ``seed``), which chooses its epoch and calibrates it
        instead of its held-out rows."""
        return split_off_dev(self.training(repeat, fold), fraction, seed)

    def held_rows(self, repeat: int) -> list[int]:
        """The rows some fold of repeat ``repeat`` holds out (what its out-of-fold predictions
        cover), in the table's order."""
        return [row for row, held in enumerate(self.assignments[repeat]) if held >= 0]

    def runs(self) -> list[tuple[int, int, str]]:
        """``(repeat, fold, name)`` of every fold model, in training order."""
        return [
            (repeat, fold, fold_name(repeat, fold, self.repeats))
            for repeat in range(self.repeats)
            for fold in range(self.folds)
        ]

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str) -> FoldPlan:
        """A plan as ``to_json`` wrote it; one damaged or edited by hand is an error naming
        ``source``."""
        try:
            plan = cls(**data)
            whole = all(
                len(held) == plan.rows and all(0 <= f < plan.folds for f in held)
                for held in plan.assignments
            )
        except (TypeError, ValueError):
            whole = False
        if not whole or len(plan.assignments) != plan.repeats:
            raise ConfigError(
                f"{source}: not a fold assignment bistack wrote (edited or damaged); delete it "
                "to split again"
            )
        return plan


def fold_name(repeat: int, fold: int, repeats: int) -> str:
    """``fold0``..., or ``repeat1-fold0``... when the folds are repeated."""
    return f"fold{fold}" if repeats == 1 else f"repeat{repeat + 1}-fold{fold}"


def plan_folds(folds: int, repeats: int, seed: int, data: str, splitter: Splitter) -> FoldPlan:
    """The folds of ``splitter.rows`` rows (``data``: the digest of what they were read from),
    each repeat dealt by ``splitter`` with the seed ``seed + repeat``. ConfigError, before any
    work, where the split cannot be made: fewer than 2 folds, more folds than rows, repeats of
    a split that is given rather than dealt, and whatever the splitter refuses (a class with
    fewer rows than folds, fewer groups than folds, a fold column that is not the folds'
    numbers)."""
    if folds < 2:
        raise ConfigError(f"--folds {folds}: cross-validation needs at least 2 folds")
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: at least 1")
    if repeats != 1 and not splitter.dealt:
        raise ConfigError(f"--repeats {repeats}: {splitter.one_split}; run it alone")
    if folds > splitter.rows:
        raise ConfigError(f"--folds {folds}: more folds than the {splitter.rows} rows to split")
    assignments = [splitter.assign(folds, random.Random(seed + r)) for r in range(repeats)]
    return FoldPlan(folds, repeats, seed, splitter.description, splitter.rows, data, assignments)
