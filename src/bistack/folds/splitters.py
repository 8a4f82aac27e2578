"""How a cross-validation deals rows into folds, shaped like scikit-learn's splitters.

A kind's family says what its rows can be split by (:class:`SplitKeys`: a user's fold column,
groups, classes, a numeric target); :func:`splitter_for` picks the splitter those keys and
``--split`` call for. Each splitter is a small class: plain (a seeded shuffle, as ``KFold``),
stratified (each class, or each quantile bin of a numeric target, dealt evenly over the folds,
as ``StratifiedKFold``), grouped (a group's rows never separated, the groups balanced by size,
as ``GroupKFold``), stratified-grouped (groups whole, the strata balanced as well as that
allows, as ``StratifiedGroupKFold``), or given (a column of fold numbers, as
``PredefinedSplit``), or forward-chaining in time (``TimeSeriesSplit``: each fold holds out a
block of rows and trains on the blocks before it). A splitter gives each fold's training and
held-out rows (``split``, as scikit-learn's splitters yield them); those that train each fold
on every other fold's rows deal a fold to each row (``assign``). A new splitter is a class here
and a key in the family that offers it.
"""

from __future__ import annotations

import functools
import math
import random
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NotRequired, Protocol, TypedDict

from bistack.errors import ConfigError
from bistack.folds.order import order_keys
from bistack.folds.settings import SplitName


class SplitKeys(TypedDict):
    """What a family's rows can be split by, each list one value a row: ``fold_column`` (a
    user's fold numbers, named by ``fold_column_name``), ``groups`` (kept whole, named by
    ``grouped_by``), ``strata`` (classes, named by ``stratified_by``) or ``targets`` (a
    numeric target stratified by quantile bin, named by ``targets_are``), ``order`` (each
    row's time, for a time split, named by ``ordered_by``) or ``dev_rows`` (the rows of the
    dev split, for compare-poolers' seeds, named by ``dev_is``)."""

    rows: int
    fold_column: NotRequired[list[str]]
    fold_column_name: NotRequired[str]
    groups: NotRequired[list[str]]
    grouped_by: NotRequired[str]
    strata: NotRequired[list[str]]
    stratified_by: NotRequired[str]
    targets: NotRequired[list[float]]
    targets_are: NotRequired[str]
    order: NotRequired[list[str]]
    ordered_by: NotRequired[str]
    order_format: NotRequired[str]
    dev_rows: NotRequired[list[int]]
    dev_is: NotRequired[str]


# One fold: the rows its model trains on, and the rows it holds out.
Fold = tuple[list[int], list[int]]


class Splitter(Protocol):
    """Splits ``rows`` rows into folds: ``split`` gives each fold's training and held-out rows
    for one repeat, shuffling with ``rng``; ``description`` says how, in words
    (``folds.json``'s ``split``); ``dealt``: whether each repeat deals anew (else
    ``one_split`` says why not); ``every_row``: whether every row is held out by one fold (a
    time split's first block is held out by none)."""

    @property
    def rows(self) -> int: ...
    @property
    def every_row(self) -> bool: ...
    @property
    def description(self) -> str: ...
    @property
    def dealt(self) -> bool: ...
    @property
    def one_split(self) -> str: ...
    def split(self, folds: int, rng: random.Random) -> list[Fold]: ...


class Assigned:
    """A splitter that deals each row one fold (``assign``), each fold training on every
    other fold's rows."""

    every_row = True

    def assign(self, folds: int, rng: random.Random) -> list[int]:
        raise NotImplementedError

    def split(self, folds: int, rng: random.Random) -> list[Fold]:
        assignment = self.assign(folds, rng)
        return [
            (
                [row for row, held in enumerate(assignment) if held != fold],
                [row for row, held in enumerate(assignment) if held == fold],
            )
            for fold in range(folds)
        ]


class Dealt(Assigned):
    """What every splitter that deals rows with a seed shares."""

    dealt = True
    one_split = ""


@dataclass(frozen=True)
class Strata:
    """Each row's stratum: its class (``labels``), or its numeric target's quantile bin
    (``targets``, binned as the folds allow); ``what`` names them."""

    what: str
    labels: Sequence[str] = ()
    targets: Sequence[float] | None = None

    def of(self, folds: int) -> list[str]:
        return target_bins(self.targets, folds) if self.targets is not None else list(self.labels)


@dataclass(frozen=True)
class PlainSplit(Dealt):
    """A seeded shuffle, dealt round the folds: sizes differ by at most one."""

    rows: int
    description = "plain (shuffled)"

    def assign(self, folds: int, rng: random.Random) -> list[int]:
        return plain_folds(self.rows, folds, rng)


@dataclass(frozen=True)
class StratifiedSplit(Dealt):
    """Each stratum's rows dealt round the folds after a shuffle, each stratum starting where
    the last stopped (sizes still differ by at most one). A stratum with fewer rows than folds
    cannot be in every fold: an error naming it, with the plain split offered."""

    strata: Strata

    @property
    def rows(self) -> int:
        return len(self.strata.labels) if self.strata.targets is None else len(self.strata.targets)

    @property
    def description(self) -> str:
        return f"stratified by {self.strata.what}"

    def assign(self, folds: int, rng: random.Random) -> list[int]:
        strata = self.strata.of(folds)
        counts = Counter(strata)
        for value, count in sorted(counts.items(), key=lambda item: (item[1], item[0])):
            if count < folds:
                raise ConfigError(
                    f"{self.strata.what} {value!r} has {count} row(s), fewer than the {folds} "
                    "folds: a stratified split cannot put it in every fold; give fewer folds, or "
                    "--split plain to split without stratifying"
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


@dataclass(frozen=True)
class GroupedSplit(Dealt):
    """Whole groups at a time: the groups shuffled, then, largest first, each given to the
    fold with the fewest rows so far."""

    groups: Sequence[str]
    grouped_by: str

    @property
    def rows(self) -> int:
        return len(self.groups)

    @property
    def description(self) -> str:
        return f"grouped by {self.grouped_by}"

    def assign(self, folds: int, rng: random.Random) -> list[int]:
        sizes = Counter(self.groups)
        enough_groups(len(sizes), folds, self.grouped_by)
        names = sorted(sizes)
        rng.shuffle(names)
        names.sort(key=lambda name: -sizes[name])  # stable: ties stay in shuffled order
        filled = [0] * folds
        fold_of = {}
        for name in names:
            fold = min(range(folds), key=lambda f: (filled[f], f))
            fold_of[name] = fold
            filled[fold] += sizes[name]
        return [fold_of[group] for group in self.groups]


@dataclass(frozen=True)
class StratifiedGroupedSplit(Dealt):
    """Whole groups at a time, the strata's shares balanced as well as that allows (as
    scikit-learn's ``StratifiedGroupKFold``): the groups shuffled, then, those whose strata are
    most uneven first, each given to the fold where it leaves the spread of every stratum's
    share across folds smallest (ties: the fold with the fewest rows)."""

    groups: Sequence[str]
    grouped_by: str
    strata: Strata

    @property
    def rows(self) -> int:
        return len(self.groups)

    @property
    def description(self) -> str:
        return f"grouped by {self.grouped_by}, stratified by {self.strata.what}"

    def assign(self, folds: int, rng: random.Random) -> list[int]:
        names = sorted(set(self.groups))
        enough_groups(len(names), folds, self.grouped_by)
        strata = self.strata.of(folds)
        kinds = sorted(set(strata))
        column = {kind: k for k, kind in enumerate(kinds)}
        counts = {name: [0] * len(kinds) for name in names}
        for group, stratum in zip(self.groups, strata, strict=True):
            counts[group][column[stratum]] += 1
        totals = [sum(counts[n][k] for n in names) for k in range(len(kinds))]
        filled = [[0] * len(kinds) for _ in range(folds)]

        def unevenness(group: str) -> float:
            return statistics.pstdev(c / t for c, t in zip(counts[group], totals, strict=True))

        def spread_with(fold: int, group: str) -> tuple[float, int, int]:
            """The mean spread of the strata's shares over the folds were ``group`` in
            ``fold``, then that fold's rows so far, then its number."""
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
        return [fold_of[group] for group in self.groups]


@dataclass(frozen=True)
class GivenFolds(Assigned):
    """Each row's fold as a user's column gives it (scikit-learn's ``PredefinedSplit``, a
    notebook's saved ``kfold``): the numbers 0..K-1, K ``--folds``; one split, never dealt."""

    column: Sequence[str]
    name: str
    groups: Sequence[str] | None = None  # each checked to lie in one given fold
    grouped_by: str = "group"
    dealt = False

    @property
    def rows(self) -> int:
        return len(self.column)

    @property
    def description(self) -> str:
        return f"as given by {self.name}"

    @property
    def one_split(self) -> str:
        return "a fold column gives one split"

    def assign(self, folds: int, rng: random.Random) -> list[int]:
        assignment = []
        for row, value in enumerate(self.column, 1):
            number = fold_number(value)
            if number is None:
                raise ConfigError(
                    f"{self.name}, row {row}: {value!r} is not a fold number; expected an "
                    f"integer from 0 to {folds - 1} in ASCII digits (1.0, as pandas writes an "
                    "integer column with a gap, is taken as 1)"
                )
            assignment.append(number)
        found = sorted(set(assignment))
        if found != list(range(folds)):
            raise ConfigError(
                f"{self.name} holds folds {', '.join(map(str, found))}; --folds {folds} needs "
                f"rows in each fold from 0 to {folds - 1}, and no other: "
                f"{what_to_change(found, folds)}"
            )
        if self.groups is not None:
            refuse_split_groups(self.groups, assignment, self.grouped_by, self.name)
        return assignment


@dataclass(frozen=True)
class TimeSplit:
    """Forward chaining (scikit-learn's ``TimeSeriesSplit``): the rows in the order of ``order``
    (read as times by one rule for the whole column, see ``bistack.folds.order``, in ``date_format``
    where given; ties in the table's order) cut into ``folds + 1`` blocks of near-equal size; fold k
    holds out block k + 1 and trains on blocks 0 to k, so no fold trains on a row after the ones it
    holds out. The first block is held out by none. One split, never dealt."""

    order: Sequence[str]
    ordered_by: str
    date_format: str | None = None
    dealt = False
    one_split = "a time split gives one split"
    every_row = False

    @property
    def rows(self) -> int:
        return len(self.order)

    @property
    def description(self) -> str:
        return (
            f"forward-chaining in the order of {self.ordered_by}, the first block held out by none"
        )

    def split(self, folds: int, rng: random.Random) -> list[Fold]:
        if folds + 1 > self.rows:
            raise ConfigError(
                f"--folds {folds}: a time split cuts the {self.rows} rows into {folds + 1} blocks "
                "(the first trains only); give fewer folds"
            )
        keys = order_keys(self.order, self.ordered_by, self.date_format)
        ordered = sorted(range(self.rows), key=lambda row: (keys[row], row))
        edges = [round(block * self.rows / (folds + 1)) for block in range(folds + 2)]
        return [  # the training rows oldest first: an inner dev split takes the latest
            (ordered[: edges[k + 1]], sorted(ordered[edges[k + 1] : edges[k + 2]]))
            for k in range(folds)
        ]


def refuse_split_groups(
    groups: Sequence[str], assignment: list[int], grouped_by: str, name: str
) -> None:
    """Given folds that part a group (rows of one group in two folds) refused, naming the
    first such group: a group's rows are kept in one fold."""
    fold_of: dict[str, int] = {}
    for row, (group, fold) in enumerate(zip(groups, assignment, strict=True), 1):
        first = fold_of.setdefault(group, fold)
        if first != fold:
            raise ConfigError(
                f"{grouped_by} {group!r} lies in folds {first} and {fold} of {name} (row "
                f"{row}): a group's rows are kept in one fold; give folds that keep each group "
                f"whole, or leave out data.group_column"
            )


FOLD_NUMBER = re.compile(r"-?[0-9]+(?:\.0*)?")


def fold_number(value: object) -> int | None:
    """A fold column's value as a fold number: an integer in ASCII digits, or a number with no
    fraction (``1.0``); None for anything else (``²``, Arabic-Indic digits, ``1.5``, `` 1 ``,
    an empty cell)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    text = str(value)
    return int(text.split(".")[0]) if FOLD_NUMBER.fullmatch(text) else None


def what_to_change(found: list[int], folds: int) -> str:
    """How a fold column holding the folds ``found`` (sorted) differs from ``--folds
    folds``'s 0 to folds-1, in words, with what would mend it."""
    if found == list(range(len(found))):
        return f"the column numbers {len(found)} folds from 0: give --folds {len(found)}"
    if found == list(range(1, len(found) + 1)):
        also = f" and give --folds {len(found)}" if len(found) != folds else ""
        return (
            f"the column counts its {len(found)} folds from 1, and folds are numbered from 0: "
            f"subtract 1 from it{also}"
        )
    outside = [f for f in found if not 0 <= f < folds]
    empty = [f for f in range(folds) if f not in found]
    said = []
    if empty:
        said.append(f"no row is in fold {', '.join(map(str, empty))}")
    if outside:
        said.append(f"{', '.join(map(str, outside))} lies outside 0 to {folds - 1}")
    return "; ".join(said) + " (renumber the column's folds 0, 1, ... with no gap)"


@dataclass(frozen=True)
class DevSplit:
    """The ``dev`` rows held out by one fold, the others trained on: the same split in every
    repeat (a repeat is another training seed, not another deal); ``dev_is`` names them."""

    rows: int
    dev: tuple[int, ...]
    dev_is: str
    dealt = True  # a repeat trains the same split again, with its own seed
    one_split = ""
    every_row = False  # the training rows are held out by none

    @property
    def description(self) -> str:
        return f"the dev rows ({self.dev_is}) held out, the others trained on"

    def split(self, folds: int, rng: random.Random) -> list[Fold]:
        held = set(self.dev)
        return [([row for row in range(self.rows) if row not in held], sorted(held))]


def splitter_for(keys: SplitKeys, split: SplitName = "auto") -> Splitter:
    """The splitter ``keys`` and ``split`` call for: the dev rows held out; a fold column as
    given; else groups kept whole, with the strata (classes, or a binned target) balanced too
    unless ``split`` is ``plain``; else the strata alone (unless ``plain``); else a plain
    shuffle."""
    plain = split == "plain"
    if split == "dev":
        if "dev_rows" not in keys:
            raise ConfigError("these rows have no dev split to hold out")
        return DevSplit(keys["rows"], tuple(keys["dev_rows"]), keys.get("dev_is", "dev"))
    if split == "time":
        if "order" not in keys:
            raise ConfigError(
                "--split time orders the rows by data.order_column: name the column holding "
                "each row's time (a number, or a date written as ISO's YYYY-MM-DD)"
            )
        return TimeSplit(
            keys["order"], keys.get("ordered_by", "the order column"), keys.get("order_format")
        )
    if "fold_column" in keys:
        return GivenFolds(
            keys["fold_column"],
            keys.get("fold_column_name", "the fold column"),
            keys.get("groups"),
            keys.get("grouped_by", "group"),
        )
    strata = None if plain else strata_of(keys)
    if "groups" in keys:
        grouped_by = keys.get("grouped_by", "group")
        if strata is not None:
            return StratifiedGroupedSplit(keys["groups"], grouped_by, strata)
        return GroupedSplit(keys["groups"], grouped_by)
    return StratifiedSplit(strata) if strata is not None else PlainSplit(keys["rows"])


def strata_of(keys: SplitKeys) -> Strata | None:
    """The strata ``keys`` offer: classes, or a numeric target's bins; None where neither."""
    if "strata" in keys:
        return Strata(keys.get("stratified_by", "class"), labels=keys["strata"])
    if "targets" in keys:
        return Strata(f"binned {keys.get('targets_are', 'target')}", targets=keys["targets"])
    return None


def enough_groups(count: int, folds: int, what: str) -> None:
    if count < folds:
        raise ConfigError(
            f"--folds {folds}: only {count} distinct value(s) of {what} to split, and a "
            "group is never separated; give fewer folds"
        )


def plain_folds(rows: int, folds: int, rng: random.Random) -> list[int]:
    """Each row's fold after a shuffle; fold sizes differ by at most one."""
    order = list(range(rows))
    rng.shuffle(order)
    assignment = [0] * rows
    for position, row in enumerate(order):
        assignment[row] = position % folds
    return assignment


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
