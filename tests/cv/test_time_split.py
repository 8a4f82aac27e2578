"""A time split (``bistack cv --split time`` with ``data.order_column``): forward chaining, as
scikit-learn's ``TimeSeriesSplit``. No fold trains, stops early or calibrates on a row after the
ones it holds out; the first block is held out by none and is absent from the out-of-fold files;
the CV's score is over the rows some fold held out; a blend refuses it; what cannot act with it
(repeats, a fold column, groups, a tagger) is refused by name."""

import csv
import json
import random
import re
import shutil
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from bistack.errors import ConfigError
from bistack.folds.plan import FoldPlan, plan_folds
from bistack.folds.splitters import PlainSplit, TimeSplit, splitter_for
from tests.text_models.test_end_to_end import sentiment_rows, text_config

ROWS = 40


def test_each_fold_trains_on_the_blocks_before_the_one_it_holds_out():
    order = [str(t) for t in random.Random(1).sample(range(100), 23)]  # numbers, as text
    plan = plan_folds(4, 1, 0, "digest", TimeSplit(order, "column 'time'"))
    time = [float(t) for t in order]
    held_by_some = []
    for fold in range(4):
        held, train = plan.held_out(0, fold), plan.training(0, fold)
        assert held and train and set(held).isdisjoint(train)
        assert max(time[r] for r in train) < min(time[r] for r in held)
        assert [time[r] for r in train] == sorted(time[r] for r in train)  # oldest first
        held_by_some += held
        # Its calibration is fitted on earlier folds' held-out rows only, its inner dev the
        # latest rows it trains on.
        for other in plan.calibrated_by(0, fold):
            assert max(time[r] for r in plan.held_out(0, other)) < min(time[r] for r in held)
        assert plan.calibrated_by(0, fold) == list(range(fold))
        inner, dev = plan.inner_dev(0, fold, 0.25, 0)
        assert sorted(inner + dev) == sorted(train)
        assert max(time[r] for r in inner) <= min(time[r] for r in dev)
    first = [r for r in range(len(order)) if plan.assignments[0][r] == -1]
    assert sorted(first + held_by_some) == list(range(len(order)))  # every row once
    assert max(time[r] for r in first) < min(time[r] for r in held_by_some)
    assert plan.held_rows(0) == sorted(held_by_some)
    # folds.json says which rows each fold trains on, and reads back the same plan.
    assert FoldPlan.from_json(json.loads(json.dumps(plan.to_json())), "folds.json") == plan


def test_dates_sort_as_written_and_numbers_as_numbers():
    dates = ["2024-03-01", "2023-12-31", "2024-01-15", "2023-06-30", "2024-02-29", "2023-01-01"]
    plan = plan_folds(2, 1, 0, "digest", TimeSplit(dates, "column 'date'"))
    assert [dates[r] for r in plan.training(0, 1)] == sorted(dates)[:4]
    numbers = ["9", "10", "8", "100", "1", "11"]  # as text, "10" < "9"
    plan = plan_folds(2, 1, 0, "digest", TimeSplit(numbers, "column 'n'"))
    assert [numbers[r] for r in plan.held_out(0, 1)] == ["100", "11"]


def test_what_a_time_split_cannot_do_is_refused():
    with pytest.raises(ConfigError, match="a time split gives one split"):
        plan_folds(3, 2, 0, "digest", TimeSplit([str(i) for i in range(20)], "column 't'"))
    with pytest.raises(
        ConfigError, match=re.escape("--folds 5: a time split cuts the 5 rows into 6")
    ):
        plan_folds(5, 1, 0, "digest", TimeSplit([str(i) for i in range(5)], "column 't'"))
    with pytest.raises(
        ConfigError, match=re.escape("--split time orders the rows by data.order_column")
    ):
        splitter_for({"rows": 10}, "time")


def test_the_other_splits_write_the_plan_they_wrote_before():
    """Only a split whose folds do not train on every other fold says which rows they train
    on: every other split's folds.json keeps its fields (the bytes the CV outputs check)."""
    plan = plan_folds(3, 2, 7, "digest", PlainSplit(12))
    fields = ["folds", "repeats", "seed", "split", "rows", "data", "assignments"]
    assert list(plan.to_json()) == fields
    assert plan.training_rows is None and plan.held_rows(1) == list(range(12))


def write_timed_table(path: Path) -> Path:
    """Sentiment rows in a shuffled order, each with its day (``time``) and an id."""
    rows = sentiment_rows(ROWS, 5)
    days = random.Random(3).sample(range(1, 400), ROWS)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["item", "sentence", "label", "time"])
        for index, ((text, label), day) in enumerate(zip(rows, days, strict=True)):
            writer.writerow([f"id{index}", text, label, day])
    return path


@pytest.fixture(scope="module")
def time_cv(tmp_path_factory):
    root = tmp_path_factory.mktemp("time-cv")
    train = write_timed_table(root / "train.tsv")
    config = text_config(train, None, train={"max_epochs": 2, "patience": 2})
    config["data"] |= {"dev": None, "order_column": "time", "id_column": "item"}
    path = root / "cv.yaml"
    path.write_text(yaml.safe_dump(config))
    args = ["cv", str(path), "--folds", "3", "--split", "time", "--no-progress", "--threads", "1"]
    assert main([*args, "--output", str(root / "out")]) == 0
    with train.open() as handle:
        table = list(csv.DictReader(handle, delimiter="\t"))
    return root, path, table


def test_a_time_split_cv_never_trains_on_what_comes_after_its_held_out_rows(time_cv):
    root, _, table = time_cv
    out = root / "out"
    time = [int(row["time"]) for row in table]
    plan = json.loads((out / "folds.json").read_text())
    summary = json.loads((out / "cv.json").read_text())
    for fold in range(3):
        record = json.loads((out / "folds" / f"fold{fold}" / "fold.json").read_text())
        assert max(time[r] for r in record["train"]) < min(time[r] for r in record["held"])
        # Calibrated on the earlier folds' out-of-fold predictions only.
        fitted_on = summary["fold_calibration"][f"fold{fold}"]["fitted_on"]
        assert fitted_on == [f"fold{earlier}" for earlier in range(fold)]
    assert "note" in summary["fold_calibration"]["fold0"]  # nothing earlier to fit on
    first = [r for r, fold in enumerate(plan["assignments"][0]) if fold == -1]
    assert len(first) == ROWS // 4 and max(time[r] for r in first) < min(
        t for r, t in enumerate(time) if r not in first
    )
    # The out-of-fold files hold the rows some fold held out, and the score is over them.
    with (out / "oof.csv").open() as handle:
        oof = list(csv.DictReader(handle))
    assert [row["item"] for row in oof] == [table[r]["item"] for r in range(ROWS) if r not in first]
    jsonl = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    assert [record["item"] for record in jsonl] == [row["item"] for row in oof]
    right = sum(row["label"] == row["gold"] for row in oof)
    assert summary["cv"] == pytest.approx(100 * right / len(oof))
    assert (summary["rows"], summary["rows_scored"]) == (ROWS, len(oof))
    assert "forward-chaining in the order of column 'time'" in summary["split"]


def test_a_time_split_serves_its_last_fold_not_a_mean_weighing_the_first_alike(time_cv):
    """Fold 0 trained on one block, fold 2 on three: the ensemble is fold 2's model alone,
    and says so; it predicts as that fold's model does."""
    from bistack.predictor import open_model

    root, _, _ = time_cv
    out = root / "out"
    ensemble = json.loads((out / "model" / "ensemble.json").read_text())
    assert ensemble["members"] == ["fold2"]
    assert ensemble["served"].startswith("fold2 alone: a time split's last fold")
    assert "fold2 alone" in (out / "cv.log").read_text()
    texts = ["a fine film", "a dull film"]
    served = [p.probabilities for p in open_model(out / "model").predict(texts)]
    last = [p.probabilities for p in open_model(out / "folds" / "fold2" / "model").predict(texts)]
    for got, want in zip(served, last, strict=True):
        assert got.keys() == want.keys()


def test_a_time_split_cv_is_not_blended_and_refuses_what_cannot_act(time_cv, capsys):
    root, path, _ = time_cv
    capsys.readouterr()
    shutil.copytree(root / "out", root / "copy")  # a second run of the same folds
    assert main(["blend", str(root / "out"), str(root / "copy"), "--output", str(root / "b")])
    assert "hold out some rows in none of them" in capsys.readouterr().err
    base = ["cv", str(path), "--folds", "3", "--no-progress", "--output", str(root / "other")]
    assert main([*base, "--split", "time", "--repeats", "2"]) != 0
    assert "a time split gives one split" in capsys.readouterr().err
    assert main(base) != 0  # an order column without a time split could not act
    assert "data.order_column 'time' orders the rows of a time split" in capsys.readouterr().err
    assert not (root / "other").exists()


def test_a_tagger_refuses_a_time_split(tmp_path, capsys):
    from tests.conftest import tiny_config
    from tests.cv.test_cross_validation import write_documents

    train = write_documents(tmp_path / "train.txt", 4, 6)
    path = tmp_path / "tagger.yaml"
    path.write_text(yaml.safe_dump(tiny_config(train, None)))
    args = ["cv", str(path), "--folds", "2", "--split", "time", "--output", str(tmp_path / "o")]
    assert main(args) != 0
    assert "a tagger's sentences are split by document" in capsys.readouterr().err


def dated(days: list[int], write: Callable[[date], str]) -> list[str]:
    return [write(date(2020, 1, 1) + timedelta(days=day)) for day in days]


SHUFFLED_DAYS = random.Random(3).sample(range(400), 60)
ACCEPTED = {  # columns a time split orders correctly, whatever text sorting would do
    "unpadded ISO dates": (dated(SHUFFLED_DAYS, lambda d: f"{d.year}-{d.month}-{d.day}"), None),
    "DD/MM/YYYY with its format": (
        dated(SHUFFLED_DAYS, lambda d: d.strftime("%d/%m/%Y")),
        "%d/%m/%Y",
    ),
    "MM/DD/YYYY with its format": (
        dated(SHUFFLED_DAYS, lambda d: d.strftime("%m/%d/%Y")),
        "%m/%d/%Y",
    ),
    "ISO with times": (dated(SHUFFLED_DAYS, lambda d: f"{d.isoformat()}T09:30:00"), None),
    "integers": ([str(day) for day in SHUFFLED_DAYS], None),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_no_fold_of_an_accepted_order_column_trains_on_a_row_after_one_it_holds_out(case):
    values, written = ACCEPTED[case]
    plan = plan_folds(4, 1, 0, "digest", TimeSplit(values, "column 'date'", written))
    for fold in range(4):
        train, held = plan.training(0, fold), plan.held_out(0, fold)
        assert max(SHUFFLED_DAYS[r] for r in train) < min(SHUFFLED_DAYS[r] for r in held), case


def with_value(value: str, at: int = 17) -> list[str]:
    values = [str(day) for day in SHUFFLED_DAYS]
    values[at] = value
    return values


REFUSED = {  # (values, data.order_format, what the refusal says)
    "NaN in integers": (with_value("NaN"), None, "has no time at row 18 ('NaN')"),
    "n/a in integers": (with_value("n/a"), None, "has no time at row 18 ('n/a')"),
    "an empty value": (with_value(""), None, "has no time at row 18 ('')"),
    "inf in integers": (with_value("inf"), None, "row 18 holds 'inf'"),
    "a date among numbers": (with_value("2020-01-05"), None, "row 18 holds '2020-01-05'"),
    "DD/MM/YYYY unsaid": (
        dated(SHUFFLED_DAYS, lambda d: d.strftime("%d/%m/%Y")),
        None,
        "either way round",
    ),
    "mixed date formats": (
        dated(SHUFFLED_DAYS[:30], lambda d: d.isoformat())
        + dated(SHUFFLED_DAYS[30:], lambda d: d.strftime("%d/%m/%Y")),
        None,
        "row 31 holds",
    ),
    "a date its format does not fit": (
        dated(SHUFFLED_DAYS[:30], lambda d: d.strftime("%d/%m/%Y"))
        + dated(SHUFFLED_DAYS[30:], lambda d: d.isoformat()),
        "%d/%m/%Y",
        "row 31 holds",
    ),
    "time zones mixed": (
        dated(SHUFFLED_DAYS[:30], lambda d: f"{d.isoformat()}T00:00:00+02:00")
        + dated(SHUFFLED_DAYS[30:], lambda d: f"{d.isoformat()}T00:00:00"),
        None,
        "without a time zone",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_an_order_column_that_cannot_be_read_as_times_is_refused_naming_value_and_row(case):
    values, written, said = REFUSED[case]
    with pytest.raises(ConfigError, match=re.escape(said)):
        plan_folds(4, 1, 0, "digest", TimeSplit(values, "column 'date'", written))


def test_cv_reads_data_order_format_and_refuses_it_without_an_order_column(tmp_path, capsys):
    rows = sentiment_rows(ROWS, 0)
    days = random.Random(5).sample(range(400), ROWS)
    table = tmp_path / "rows.csv"
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "label", "when"])
        for (text, label), day in zip(rows, days, strict=True):
            when = (date(2020, 1, 1) + timedelta(days=day)).strftime("%d/%m/%Y")
            writer.writerow([text, label, when])
    config = text_config(table, None, train={"max_epochs": 1})
    config["data"].update(dev=None, order_column="when")
    path = tmp_path / "cv.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = ["cv", str(path), "--folds", "2", "--split", "time", "--output", str(tmp_path / "cv")]
    assert main(argv) == 2
    assert "data.order_format" in capsys.readouterr().err
    assert main([*argv, "--set", 'data.order_format="%d/%m/%Y"']) == 0, capsys.readouterr().err
    plan = json.loads((tmp_path / "cv" / "folds.json").read_text())
    for fold in range(2):
        held = [r for r, f in enumerate(plan["assignments"][0]) if f == fold]
        train = plan["training_rows"][0][fold]
        assert max(days[r] for r in train) < min(days[r] for r in held)
    config["data"].update(order_column=None, order_format="%d/%m/%Y")
    path.write_text(yaml.safe_dump(config))
    assert main(["cv", str(path), "--folds", "2", "--output", str(tmp_path / "cv2")]) == 2
    assert "no data.order_column is given" in capsys.readouterr().err
