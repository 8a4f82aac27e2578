"""Cross-validation folds: the held-out fold of every row, for K folds repeated R times.

A split is plain (a seeded shuffle), stratified (each class, or each bin of a numeric target,
dealt evenly over the folds, as scikit-learn's ``StratifiedKFold`` does) or grouped (a group's
rows are never separated, the groups balanced by size as in ``GroupKFold``). Each repeat
shuffles with its own seed. A :class:`FoldPlan` is plain data, written to ``folds.json`` so
that another run, or another machine, reuses the same folds exactly.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bistack.errors import ConfigError


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

    def runs(self) -> list[tuple[int, int, str]]:
        """``(repeat, fold, name)`` of every fold model, in training order."""
        return [
            (repeat, fold, fold_name(repeat, fold, self.repeats))
            for repeat in range(self.repeats)
            for fold in range(self.folds)
        ]

    def to_json(self) -> dict[str, Any]:
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


def plan_folds(
    folds: int,
    repeats: int,
    seed: int,
    data: str,
    *,
    strata: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    stratified_by: str = "class",
    grouped_by: str = "group",
    given: Sequence[str] | None = None,
    given_by: str = "column",
) -> FoldPlan:
    """The folds of ``len(given or groups or strata)`` rows: each row's fold as ``given`` (a
    user's fold column, ``given_by`` naming it: numbers 0..K-1, K the folds); else grouped
    when ``groups`` are given (a group's rows in one fold), with ``strata`` too balanced
    over the folds as well as whole groups allow; else stratified by ``strata`` (one class or
    target bin per row, ``stratified_by`` naming what they are); else plain. ConfigError,
    before any work, where the split cannot be made: fewer than 2 folds, more folds than rows
    or groups, a class with fewer rows than folds (named, with the plain split offered), a
    fold column that is not the folds' numbers."""
    if given is not None:
        return given_folds(folds, repeats, seed, data, given, given_by)
    if groups is not None:
        rows = len(groups)
    elif strata is not None:
        rows = len(strata)
    else:
        raise ValueError("plan_folds needs the rows' strata or groups")
    if folds < 2:
        raise ConfigError(f"--folds {folds}: cross-validation needs at least 2 folds")
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: at least 1")
    if folds > rows:
        raise ConfigError(f"--folds {folds}: more folds than the {rows} rows to split")
    assignments = []
    for repeat in range(repeats):
        rng = random.Random(seed + repeat)
        if groups is not None and strata is not None and stratified_by != "plain":
            assignments.append(stratified_grouped_folds(groups, strata, folds, rng, grouped_by))
        elif groups is not None:
            assignments.append(grouped_folds(groups, folds, rng, grouped_by))
        elif stratified_by != "plain":
            assignments.append(stratified_folds(strata or [], folds, rng, stratified_by))
        else:
            assignments.append(plain_folds(rows, folds, rng))
    if groups is not None and strata is not None and stratified_by != "plain":
        split = f"grouped by {grouped_by}, stratified by {stratified_by}"
    elif groups is not None:
        split = f"grouped by {grouped_by}"
    elif stratified_by == "plain":
        split = "plain (shuffled)"
    else:
        split = f"stratified by {stratified_by}"
    return FoldPlan(folds, repeats, seed, split, rows, data, assignments)


def plain_folds(rows: int, folds: int, rng: random.Random) -> list[int]:
    """Each row's fold after a shuffle; fold sizes differ by at most one."""
    order = list(range(rows))
    rng.shuffle(order)
    assignment = [0] * rows
    for position, row in enumerate(order):
        assignment[row] = position % folds
    return assignment


def stratified_folds(strata: Sequence[str], folds: int, rng: random.Random, what: str) -> list[int]:
    """Each row's fold, every stratum's rows dealt round the folds after a shuffle, each
    stratum starting where the last one stopped (so that fold sizes still differ by at most
    one). A stratum with fewer rows than folds cannot be in every fold: an error naming it."""
    counts = Counter(strata)
    for value, count in sorted(counts.items(), key=lambda item: (item[1], item[0])):
        if count < folds:
            raise ConfigError(
                f"{what} {value!r} has {count} row(s), fewer than the {folds} folds: a stratified "
                f"split cannot put it in every fold; give fewer folds, or --split plain to "
                "split without stratifying"
            )
    assignment = [0] * len(strata)
    position = 0
    for value in sorted(counts):
        members = [row for row, stratum in enumerate(strata) if stratum == value]
        rng.shuffle(members)
        for row in members:
            assignment[row] = position % folds
            position += 1
    return assignment


def grouped_folds(groups: Sequence[str], folds: int, rng: random.Random, what: str) -> list[int]:
    """Each row's fold, whole groups at a time: the groups shuffled, then, largest first,
    each given to the fold with the fewest rows so far."""
    sizes = Counter(groups)
    if len(sizes) < folds:
        raise ConfigError(
            f"--folds {folds}: only {len(sizes)} distinct value(s) of {what} to split, and a "
            "group is never separated; give fewer folds"
        )
    names = sorted(sizes)
    rng.shuffle(names)
    names.sort(key=lambda name: -sizes[name])  # stable: ties stay in shuffled order
    filled = [0] * folds
    fold_of = {}
    for name in names:
        fold = min(range(folds), key=lambda f: (filled[f], f))
        fold_of[name] = fold
        filled[fold] += sizes[name]
    return [fold_of[group] for group in groups]


def given_folds(
    folds: int, repeats: int, seed: int, data: str, given: Sequence[str], what: str
) -> FoldPlan:
    """The plan a user's fold column gives (scikit-learn's ``PredefinedSplit``, a notebook's
    saved ``kfold``): each row's value its fold, the numbers 0..K-1 with K ``--folds``."""
    if repeats != 1:
        raise ConfigError(f"--repeats {repeats}: a fold column gives one split; run it alone")
    try:
        assignment = [int(str(value).strip()) for value in given]
    except ValueError:
        bad = next(v for v in given if not str(v).strip().lstrip("-").isdigit())
        raise ConfigError(f"{what}: {bad!r} is not a fold number (0 to {folds - 1})") from None
    found = sorted(set(assignment))
    if found != list(range(folds)):
        raise ConfigError(
            f"{what} holds folds {', '.join(map(str, found))}; --folds {folds} needs each of "
            f"0 to {folds - 1} (give --folds {len(found)} for numbers 0 to {len(found) - 1})"
        )
    return FoldPlan(folds, 1, seed, f"as given by {what}", len(assignment), data, [assignment])


def stratified_grouped_folds(
    groups: Sequence[str], strata: Sequence[str], folds: int, rng: random.Random, what: str
) -> list[int]:
    """Each row's fold, whole groups at a time, the strata's shares balanced as well as that
    allows (as scikit-learn's ``StratifiedGroupKFold``): the groups shuffled, then, those whose
    strata are most uneven first, each given to the fold where it leaves the spread of every
    stratum's share across folds smallest (ties: the fold with the fewest rows)."""
    names = sorted(set(groups))
    if len(names) < folds:
        raise ConfigError(
            f"--folds {folds}: only {len(names)} distinct value(s) of {what} to split, and a "
            "group is never separated; give fewer folds"
        )
    kinds = sorted(set(strata))
    column = {kind: k for k, kind in enumerate(kinds)}
    counts = {name: [0] * len(kinds) for name in names}
    for group, stratum in zip(groups, strata, strict=True):
        counts[group][column[stratum]] += 1
    totals = [sum(counts[n][k] for n in names) for k in range(len(kinds))]
    filled = [[0] * len(kinds) for _ in range(folds)]

    def unevenness(group: str) -> float:
        return statistics.pstdev(c / t for c, t in zip(counts[group], totals, strict=True))

    def spread_with(fold: int, group: str) -> tuple[float, int, int]:
        """The mean spread of the strata's shares over the folds were ``group`` in ``fold``,
        then that fold's rows so far, then its number."""
        added = [a + b for a, b in zip(filled[fold], counts[group], strict=True)]
        spreads = [
            statistics.pstdev(
                (added if f == fold else filled[f])[k] / totals[k] for f in range(folds)
            )
            for k in range(len(kinds))
        ]
        return statistics.fmean(spreads), sum(filled[fold]), fold

    rng.shuffle(names)
    names.sort(key=unevenness, reverse=True)  # stable: ties stay in shuffled order
    fold_of = {}
    for name in names:
        best = min(range(folds), key=functools.partial(spread_with, group=name))
        fold_of[name] = best
        filled[best] = [a + b for a, b in zip(filled[best], counts[name], strict=True)]
    return [fold_of[group] for group in groups]


def target_bins(values: Sequence[float], folds: int) -> list[str]:
    """Each value's quantile bin, for stratifying a numeric target: Sturges' number of bins
    (``1 + log2 n``, the competitors' choice), no more than leaves ``folds`` rows in each."""
    count = len(values)
    bins = max(1, min(int(1 + math.log2(max(count, 1))), count // folds))
    order = sorted(range(count), key=lambda row: (values[row], row))
    binned = [""] * count
    for rank, row in enumerate(order):
        binned[row] = f"bin {rank * bins // count + 1} of {bins}"
    return binned
