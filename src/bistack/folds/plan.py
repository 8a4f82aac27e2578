"""A cross-validation's plan: the held-out fold of every row, for K folds repeated R times.

A :class:`FoldPlan` is plain data, written to ``folds.json`` so that another run, or another
machine, reuses the same folds exactly. Each fold trains on every other fold's rows, unless the
plan says which (``training_rows``: a time split's, where a fold trains only on the rows before
those it holds out, and the first rows are held out by none). How rows are split is a
:class:`~bistack.folds.splitters.Splitter`'s; each repeat deals them with its own seed.
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
    data: the digest of the table split; assignments: per repeat, each row's held-out fold
    (-1: held out by none); training_rows: per repeat, each fold's training rows in the order
    they came (oldest first, for a time split), where a fold does not train on every other
    fold's rows (None: it does); rows_digest: the digest of the rows' own content (texts and
    targets, a blend's test of "the same rows": a column added to the table leaves it as it
    was; None in a plan of an earlier version); seeded: its repeats are training seeds of one
    split (the dev split), each fold named ``seed<N>``."""

    folds: int
    repeats: int
    seed: int
    split: str
    rows: int
    data: str
    assignments: list[list[int]]
    training_rows: list[list[list[int]]] | None = None
    rows_digest: str | None = None
    seeded: bool = False

    @property
    def forward_chaining(self) -> bool:
        """Whether the folds train on different amounts of the past (a time split: fold k on
        blocks 0 to k), rather than each on every other fold."""
        return self.training_rows is not None

    def held_out(self, repeat: int, fold: int) -> list[int]:
        """The rows fold ``fold`` of repeat ``repeat`` holds out, in the table's order."""
        return [row for row, held in enumerate(self.assignments[repeat]) if held == fold]

    def training(self, repeat: int, fold: int) -> list[int]:
        """The rows the model of that fold trains on (every other fold's, unless the plan
        says which)."""
        if self.training_rows is not None:
            return list(self.training_rows[repeat][fold])
        return [row for row, held in enumerate(self.assignments[repeat]) if held != fold]

    def inner_dev(
        self, repeat: int, fold: int, fraction: float, seed: int
    ) -> tuple[list[int], list[int]]:
        """``(train, dev)``: that fold's training rows less an inner dev split of them
        (``fraction`` of them, dealt with ``seed``; of a time split's, the latest), which
        chooses its epoch and calibrates it instead of its held-out rows."""
        if self.training_rows is None:
            return split_off_dev(self.training(repeat, fold), fraction, seed)
        ordered = self.training(repeat, fold)  # oldest first
        cut = len(ordered) - max(1, round(len(ordered) * fraction))
        return ordered[:cut], ordered[cut:]

    def calibrated_by(self, repeat: int, fold: int) -> list[int]:
        """The folds of repeat ``repeat`` whose held-out predictions fit fold ``fold``'s
        calibration: those whose held-out rows it trained on (every other fold; of a time
        split, the earlier ones), so that nothing after its held-out rows is fitted on."""
        trained = set(self.training(repeat, fold))
        return [
            other
            for other in range(self.folds)
            if other != fold and set(self.held_out(repeat, other)) <= trained
        ]

    def held_rows(self, repeat: int) -> list[int]:
        """The rows some fold of repeat ``repeat`` holds out (what its out-of-fold predictions
        cover), in the table's order."""
        return [row for row, held in enumerate(self.assignments[repeat]) if held >= 0]

    def runs(self) -> list[tuple[int, int, str]]:
        """``(repeat, fold, name)`` of every fold model, in training order."""
        return [
            (repeat, fold, fold_name(repeat, fold, self.repeats, self.seeded))
            for repeat in range(self.repeats)
            for fold in range(self.folds)
        ]

    def to_json(self) -> dict[str, object]:
        written = asdict(self)
        if self.training_rows is None:  # every fold trains on the others: nothing to say
            del written["training_rows"]
        if self.rows_digest is None:
            del written["rows_digest"]
        if not self.seeded:
            del written["seeded"]
        return written

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str) -> FoldPlan:
        """A plan as ``to_json`` wrote it; one damaged or edited by hand is an error naming
        ``source``."""
        try:
            plan = cls(**data)
            # Held out by none: a time split's first rows, a dev split's training rows.
            lowest = 0 if plan.training_rows is None and not plan.seeded else -1
            whole = all(
                len(held) == plan.rows and all(lowest <= f < plan.folds for f in held)
                for held in plan.assignments
            )
            if plan.training_rows is not None:
                whole = whole and all(
                    len(folds) == plan.folds
                    and all(0 <= row < plan.rows for rows in folds for row in rows)
                    for folds in plan.training_rows
                )
        except (TypeError, ValueError):
            whole = False
        if not whole or len(plan.assignments) != plan.repeats:
            raise ConfigError(
                f"{source}: not a fold assignment bistack wrote (edited or damaged); delete it "
                "to split again"
            )
        return plan


def fold_name(repeat: int, fold: int, repeats: int, seeded: bool = False) -> str:
    """``fold0``..., or ``repeat1-fold0``... when the folds are repeated; ``seed1``... where
    each repeat is one split trained with a seed of its own (a dev split's seeds)."""
    if seeded:
        return f"seed{repeat + 1}"
    return f"fold{fold}" if repeats == 1 else f"repeat{repeat + 1}-fold{fold}"


def plan_folds(
    folds: int,
    repeats: int,
    seed: int,
    data: str,
    splitter: Splitter,
    rows_digest: str | None = None,
    seeded: bool = False,
) -> FoldPlan:
    """The folds of ``splitter.rows`` rows (``data``: the digest of what they were read from;
    ``rows_digest``: of the rows' own content), each repeat dealt by ``splitter`` with the
    seed ``seed + repeat`` (``seeded``: the repeats are training seeds of one split).
    ConfigError, before any work, where the split cannot be made: fewer than 2 folds (a
    seeded split: 1), more folds than rows, repeats of a split that is given rather than
    dealt, a splitter whose folds are not a partition of the rows (a row held out twice in a
    repeat, or never where the splitter promises every row), and whatever the splitter
    refuses (a class with fewer rows than folds, fewer groups than folds, a fold column that
    is not the folds' numbers)."""
    if folds < (1 if seeded else 2):  # a dev split's one fold; else a fold to hold out
        raise ConfigError(f"--folds {folds}: cross-validation needs at least 2 folds")
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: at least 1")
    if repeats != 1 and not splitter.dealt:
        raise ConfigError(f"--repeats {repeats}: {splitter.one_split}; run it alone")
    if folds > splitter.rows:
        raise ConfigError(f"--folds {folds}: more folds than the {splitter.rows} rows to split")
    splits = [splitter.split(folds, random.Random(seed + r)) for r in range(repeats)]
    assignments = [held_out_once(pairs, splitter) for pairs in splits]
    complements = all(
        sorted(train) == [row for row, f in enumerate(assignment) if f != fold]
        for pairs, assignment in zip(splits, assignments, strict=True)
        for fold, (train, _) in enumerate(pairs)
    )
    training = None if complements else [[train for train, _ in pairs] for pairs in splits]
    return FoldPlan(
        folds,
        repeats,
        seed,
        splitter.description,
        splitter.rows,
        data,
        assignments,
        training,
        rows_digest,
        seeded,
    )


def held_out_once(pairs: list[tuple[list[int], list[int]]], splitter: Splitter) -> list[int]:
    """Each row's held-out fold in one repeat's ``pairs`` (-1: none), as scikit-learn's
    ``cross_val_predict`` asks of its folds: a partition. A row held out by two folds, or by
    none where the splitter promises every row, is refused naming the rows."""
    assignment = [-1] * splitter.rows
    twice: dict[int, tuple[int, int]] = {}
    for fold, (_, held) in enumerate(pairs):
        for row in held:
            if assignment[row] != -1:
                twice.setdefault(row, (assignment[row], fold))
            assignment[row] = fold
    if twice:
        shown = ", ".join(
            f"row {r + 1} (folds {a} and {b})" for r, (a, b) in list(twice.items())[:3]
        )
        raise ConfigError(
            f"the splitter ({splitter.description}) holds out {len(twice)} rows twice: "
            f"{shown}; its folds must each hold out rows no other fold holds out"
        )
    never = [row for row, fold in enumerate(assignment) if fold == -1]
    if never and splitter.every_row:
        shown = ", ".join(f"row {row + 1}" for row in never[:3])
        raise ConfigError(
            f"the splitter ({splitter.description}) holds out {len(never)} rows in no fold: "
            f"{shown}; every row must be held out by one fold"
        )
    return assignment
