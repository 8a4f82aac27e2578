"""Cross-validation folds: every row held out once a repeat, classes and target bins spread
over the folds, groups never separated (and classes balanced with them), a user's fold column
taken exactly, each impossible split refused with its reason; the splitter chosen from what a
family offers and ``--split``."""

import json
import random
import re

import pytest

from bistack.errors import ConfigError
from bistack.folds.plan import FoldPlan, plan_folds
from bistack.folds.settings import CVSettings
from bistack.folds.splitters import (
    GivenFolds,
    GroupedSplit,
    PlainSplit,
    SplitKeys,
    Strata,
    StratifiedGroupedSplit,
    StratifiedSplit,
    splitter_for,
    target_bins,
)


def classes(strata, what="class"):
    return StratifiedSplit(Strata(what, labels=strata))


def test_every_row_is_held_out_exactly_once_in_each_repeat():
    strata = ["a"] * 30 + ["b"] * 12 + ["c"] * 7
    plan = plan_folds(5, 3, 0, "digest", classes(strata))
    for repeat in range(3):
        held = [row for fold in range(5) for row in plan.held_out(repeat, fold)]
        assert sorted(held) == list(range(len(strata)))
        for fold in range(5):
            assert set(plan.training(repeat, fold)).isdisjoint(plan.held_out(repeat, fold))
    assert plan.assignments[0] != plan.assignments[1]  # each repeat shuffles anew


def test_stratified_folds_hold_every_class_in_proportion():
    strata = ["a"] * 30 + ["b"] * 12 + ["c"] * 7
    random.Random(1).shuffle(strata)
    plan = plan_folds(5, 1, 3, "digest", classes(strata))
    sizes = [len(plan.held_out(0, fold)) for fold in range(5)]
    assert max(sizes) - min(sizes) <= 1
    for label, count in (("a", 30), ("b", 12), ("c", 7)):
        per_fold = [sum(strata[r] == label for r in plan.held_out(0, f)) for f in range(5)]
        assert min(per_fold) >= count // 5 and max(per_fold) <= -(-count // 5)
    assert plan.split == "stratified by class"


def test_a_plain_split_is_a_seeded_shuffle():
    first = plan_folds(4, 1, 7, "d", PlainSplit(20))
    assert first == plan_folds(4, 1, 7, "d", PlainSplit(20))
    assert first != plan_folds(4, 1, 8, "d", PlainSplit(20))
    assert first.split == "plain (shuffled)"


def test_grouped_folds_never_separate_a_group():
    rng = random.Random(0)
    groups = [f"author{rng.randint(0, 11)}" for _ in range(80)]
    plan = plan_folds(4, 2, 0, "d", GroupedSplit(groups, "column 'author'"))
    for repeat in range(2):
        fold_of = {}
        for row, group in enumerate(groups):
            assert (
                fold_of.setdefault(group, plan.assignments[repeat][row])
                == (plan.assignments[repeat][row])
            )
    assert plan.split == "grouped by column 'author'"


def test_target_bins_leave_each_bin_a_row_per_fold():
    values = [random.Random(i).gauss(0, 1) for i in range(53)]
    bins = target_bins(values, 5)
    counts = {b: bins.count(b) for b in set(bins)}
    assert len(counts) == 6  # Sturges: 1 + log2(53), floored
    assert min(counts.values()) >= 5
    ordered = sorted(range(53), key=values.__getitem__)  # bins follow the values' order
    assert [bins[i] for i in ordered] == sorted(bins, key=lambda b: int(b.split()[1]))
    plan = plan_folds(5, 1, 0, "d", StratifiedSplit(Strata("binned target", targets=values)))
    assert plan.split == "stratified by binned target"
    assert sorted(plan.held_out(0, 0)) == sorted(
        plan_folds(5, 1, 0, "d", classes(bins, "binned target")).held_out(0, 0)
    )


@pytest.mark.parametrize(
    ("folds", "strata", "groups", "said"),
    [
        (1, ["a", "b"], None, "--folds 1: cross-validation needs at least 2 folds"),
        (2, ["a"] * 4, None, None),
        (5, ["a"] * 4, None, "--folds 5: more folds than the 4 rows"),
        (3, None, ["x", "x", "y", "y"], "only 2 distinct value(s) of group"),
        (3, ["a"] * 9 + ["rare"] * 2, None, "'rare' has 2 row(s), fewer than the 3 folds"),
    ],
)
def test_an_impossible_split_is_refused_with_its_reason(folds, strata, groups, said):
    keys = {"rows": len(strata or groups)}
    keys |= {"strata": strata} if strata else {"groups": groups}
    if said is None:  # one class: every fold holds it
        assert plan_folds(folds, 1, 0, "d", splitter_for(keys)).rows == len(strata)
        return
    with pytest.raises(ConfigError, match=None) as refused:
        plan_folds(folds, 1, 0, "d", splitter_for(keys))
    assert said in str(refused.value)
    if strata and "rare" in strata:
        assert "--split plain" in str(refused.value)


def test_a_fold_file_edited_by_hand_is_refused():
    plan = plan_folds(3, 1, 0, "d", classes(["a", "b"] * 6))
    edited = plan.to_json() | {"assignments": [[0, 1, 7] + [0] * 9]}
    with pytest.raises(ConfigError, match=r"folds\.json: not a fold assignment bistack wrote"):
        FoldPlan.from_json(edited, "folds.json")
    assert FoldPlan.from_json(plan.to_json(), "folds.json") == plan


def test_stratified_grouped_folds_keep_groups_whole_and_balance_the_classes():
    """Groups whose classes are skewed (some all positive, some all negative, of uneven
    sizes): grouped alone, the folds' shares drift; stratified too, they stay near the whole."""
    rng = random.Random(0)
    groups, labels = [], []
    for group in range(60):
        size, share = rng.randint(2, 30), rng.choice([0.0, 0.2, 0.5, 0.8, 1.0])
        for _ in range(size):
            groups.append(f"g{group}")
            labels.append("pos" if rng.random() < share else "neg")
    whole = labels.count("pos") / len(labels)

    def worst(plan) -> float:
        shares = []
        for fold in range(5):
            held = plan.held_out(0, fold)
            shares.append(sum(labels[i] == "pos" for i in held) / len(held))
        return max(abs(share - whole) for share in shares)

    by = "column 'author'"
    both = plan_folds(5, 1, 0, "d", StratifiedGroupedSplit(groups, by, Strata("class", labels)))
    alone = plan_folds(5, 1, 0, "d", GroupedSplit(groups, by))
    for plan in (both, alone):
        fold_of = {}
        for row, fold in enumerate(plan.assignments[0]):
            assert fold_of.setdefault(groups[row], fold) == fold  # a group in one fold
    assert both.split == "grouped by column 'author', stratified by class"
    assert worst(both) < 0.02 < worst(alone)


def test_a_fold_column_gives_the_folds_exactly_or_is_refused_naming_why():
    given = [str(i % 3) for i in range(10)]
    column = GivenFolds(given, "column 'kfold'")
    plan = plan_folds(3, 1, 7, "d", column)
    assert plan.assignments == [[i % 3 for i in range(10)]]
    assert plan.split == "as given by column 'kfold'"
    with pytest.raises(ConfigError, match=r"holds folds 0, 1, 2; .*numbers 3 folds from 0: give "
                       "--folds 3"):  # fmt: skip
        plan_folds(5, 1, 7, "d", column)
    with pytest.raises(ConfigError, match="row 10: 'x' is not a fold number"):
        plan_folds(3, 1, 7, "d", GivenFolds([*given[:-1], "x"], "column 'kfold'"))
    floats = GivenFolds([f"{i % 3}.0" for i in range(10)], "column 'kfold'")  # pandas, a gap
    assert plan_folds(3, 1, 7, "d", floats).assignments == plan.assignments


@pytest.mark.parametrize("odd", ["\u00b2", "\u0661", " 1 ", "1.5", "", "one", "+1", "1e0"])
def test_a_fold_value_is_an_ascii_integer_or_refused_naming_its_row(odd):
    given = [str(i % 3) for i in range(9)]
    given[4] = odd
    with pytest.raises(ConfigError, match=rf"column 'kfold', row 5: {re.escape(repr(odd))} is not"):
        plan_folds(3, 1, 7, "d", GivenFolds(given, "column 'kfold'"))


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ([1, 2, 3], "counts its 3 folds from 1, and folds are numbered from 0: subtract 1"),
        ([0, 1, 3], "no row is in fold 2; 3 lies outside 0 to 2"),
        ([0, 2], "no row is in fold 1"),
        ([0, 1, 2, 3], "numbers 4 folds from 0: give --folds 4"),
    ],
)
def test_a_fold_column_that_does_not_match_folds_says_what_it_holds(values, said):
    column = GivenFolds([str(values[i % len(values)]) for i in range(12)], "column 'kfold'")
    with pytest.raises(ConfigError) as error:
        plan_folds(3, 1, 7, "d", column)
    assert said in str(error.value)
    assert "give --folds 3" not in str(error.value)  # never the --folds the user gave
    with pytest.raises(ConfigError, match="--repeats 2: a fold column gives one split"):
        plan_folds(3, 2, 7, "d", column)


def test_stratified_grouped_folds_on_sst2_keep_class_shares_within_two_points():
    """SST-2's training phrases grouped by their first word (uneven groups, some far from the
    whole's positive share): each fold's positive share within 0.02 of the whole's."""
    from bistack.data.tables import read_table
    from tests.conftest import shared_file

    rows = read_table(shared_file("sst2", "train.tsv"), "sentence", ["label"])
    groups = [row.text.split()[0] for row in rows]
    labels = [row.labels[0] for row in rows]
    keys = {"rows": len(rows), "groups": groups, "grouped_by": "first word", "strata": labels}
    plan = plan_folds(5, 1, 13, "d", splitter_for(keys))
    whole = labels.count("1") / len(labels)
    fold_of = {}
    for row, fold in enumerate(plan.assignments[0]):
        assert fold_of.setdefault(groups[row], fold) == fold
    for fold in range(5):
        held = plan.held_out(0, fold)
        assert abs(sum(labels[i] == "1" for i in held) / len(held) - whole) < 0.02


@pytest.mark.parametrize(
    ("keys", "plain", "chosen", "split"),
    [
        ({"strata": ["a", "b"] * 5}, False, StratifiedSplit, "stratified by class"),
        ({"strata": ["a", "b"] * 5}, True, PlainSplit, "plain (shuffled)"),
        (
            {"targets": [float(i) for i in range(10)], "targets_are": "score"},
            False,
            StratifiedSplit,
            "stratified by binned score",
        ),
        (
            {"groups": list("aabbccddee"), "grouped_by": "document"},
            False,
            GroupedSplit,
            "grouped by document",
        ),
        (
            {"groups": list("aabbccddee"), "strata": ["x", "y"] * 5},
            False,
            StratifiedGroupedSplit,
            "grouped by group, stratified by class",
        ),
        (
            {"groups": list("aabbccddee"), "strata": ["x", "y"] * 5},
            True,
            GroupedSplit,
            "grouped by group",
        ),
        (
            {"fold_column": ["0", "1"] * 5, "strata": ["x", "y"] * 5},
            True,
            GivenFolds,
            "as given by the fold column",
        ),
        ({}, False, PlainSplit, "plain (shuffled)"),
    ],
)
def test_the_splitter_is_chosen_from_what_the_rows_offer_and_the_split_asked(
    keys, plain, chosen, split
):
    splitter = splitter_for({"rows": 10, **keys}, "plain" if plain else "auto")
    assert type(splitter) is chosen
    plan = plan_folds(2, 1, 0, "d", splitter)
    assert plan.split == split and plan.rows == 10


class TwiceSplitter:
    """A splitter of a user's own whose folds are not a partition: row 0 held out twice, and
    (with ``drop``) row 5 by none."""

    description = "a user's own"
    dealt = False
    one_split = "a user's own split"
    every_row = True

    def __init__(self, rows: int, drop: bool = False) -> None:
        self.rows, self.drop = rows, drop

    def split(self, folds, rng):
        rows = list(range(self.rows))
        if self.drop:
            even, odd = rows[0::2], [r for r in rows[1::2] if r != 5]
            return [(odd, even), (even, odd)]
        return [(rows[5:], rows[:5]), (rows[1:5], [0, *rows[5:]])]


def test_a_splitter_whose_folds_are_not_a_partition_is_refused_naming_the_rows():
    from bistack.folds.plan import plan_folds

    with pytest.raises(ConfigError, match=r"holds out 1 rows twice: row 1 \(folds 0 and 1\)"):
        plan_folds(2, 1, 0, "digest", TwiceSplitter(10))
    with pytest.raises(ConfigError, match=r"holds out 1 rows in no fold: row 6"):
        plan_folds(2, 1, 0, "digest", TwiceSplitter(10, drop=True))


def test_a_dev_split_holds_out_the_same_dev_rows_each_seed_and_only_them():
    """compare-poolers' seeds: one fold, the dev rows, the same in every repeat (a repeat is a
    training seed), named seed1...; the training rows are held out by none."""
    keys: SplitKeys = {"rows": 10, "dev_rows": [7, 2, 9], "dev_is": "data.dev dev.tsv"}
    plan = plan_folds(1, 3, 42, "digest", splitter_for(keys, "dev"), seeded=True)
    assert [name for _, _, name in plan.runs()] == ["seed1", "seed2", "seed3"]
    for repeat in range(3):
        assert plan.held_out(repeat, 0) == [2, 7, 9]
        assert plan.training(repeat, 0) == [0, 1, 3, 4, 5, 6, 8]
        assert plan.held_rows(repeat) == [2, 7, 9]
    again = FoldPlan.from_json(json.loads(json.dumps(plan.to_json())), "folds.json")
    assert again == plan
    with pytest.raises(ConfigError, match="at least 2 folds"):
        plan_folds(1, 1, 42, "digest", splitter_for({"rows": 10}, "plain"))
    with pytest.raises(ConfigError, match="the dev split holds out one fold"):
        CVSettings(3, split="dev")
