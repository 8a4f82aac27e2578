"""``train.eval_every``: dev scored within epochs (every N optimizer steps of the run, or a share
of each epoch), the best model kept at whichever validation scored best, patience counted in
validations, metrics.csv and TensorBoard drawn by step."""

from __future__ import annotations

import csv

import pytest
import yaml

from bistack.api import Classifier
from bistack.cli import main
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

BATCHES = 8  # 64 rows in batches of 8: 8 optimizer steps an epoch


def run(tmp_path, capsys, optimizer=None, count=64, **train):
    rows = tmp_path / "train.tsv"
    write_tsv(rows, sentiment_rows(count, 0))
    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(30, 1))
    settings = {"batch_size": 8, "max_epochs": 2, "patience": 20, "length_buckets": False}
    config = text_config(rows, dev, train=settings | train, optimizer=optimizer or {})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main(["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"])
    said = capsys.readouterr()
    assert code == 0, said.err
    with (tmp_path / "run" / "metrics.csv").open() as handle:
        return list(csv.DictReader(handle)), said.out


def test_a_share_of_an_epoch_validates_within_each_epoch_and_keeps_the_best(tmp_path, capsys):
    rows, _ = run(tmp_path, capsys, eval_every=0.25)
    assert [int(r["step"]) for r in rows] == [2, 4, 6, 8, 10, 12, 14, 16]
    assert [int(r["epoch"]) for r in rows] == [1] * 4 + [2] * 4
    scores = [float(r["dev_accuracy"]) for r in rows]
    best = scores.index(max(scores))  # the first of the best: a tie never replaces the model
    model = Classifier.load(tmp_path / "run" / "model")
    assert model.evaluate(tmp_path / "dev.tsv")["accuracy"] == pytest.approx(scores[best])
    card = (tmp_path / "run" / "model" / "README.md").read_text()
    assert f"(optimizer step {rows[best]['step']})" in card


def test_a_share_that_does_not_divide_the_epoch_validates_as_often_as_it_says(tmp_path, capsys):
    """9 steps an epoch in quarters: three validations within it, at its rounded quarters, then
    its end; not a fourth a step before the end."""
    rows, _ = run(tmp_path, capsys, count=72, eval_every=0.25)
    assert [int(r["step"]) for r in rows] == [2, 4, 7, 9, 11, 13, 16, 18]


def test_a_number_of_steps_counts_over_the_whole_run(tmp_path, capsys):
    rows, _ = run(tmp_path, capsys, eval_every=3)
    assert [int(r["step"]) for r in rows] == [3, 6, 8, 9, 12, 15, 16]  # and each epoch's end


def test_patience_counts_validations(tmp_path, capsys):
    """A learning rate too small to change a thing: the first validation is the best, and two
    more without improvement stop the run within its first epoch."""
    rows, said = run(tmp_path, capsys, {"lr": 1e-12}, eval_every=2, patience=2)
    assert [int(r["step"]) for r in rows] == [2, 4, 6]
    assert "stopping after epoch 1 step 6: no dev improvement" in said


def test_steps_draw_the_tensorboard_curve(tmp_path, capsys):
    pytest.importorskip("tensorboard", reason="TensorBoard is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run(tmp_path, capsys, eval_every=0.5)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("dev_accuracy")] == [4, 8, 12, 16]


def test_a_fractional_number_of_steps_is_refused(tmp_path, capsys):
    config = text_config(tmp_path / "t.tsv", tmp_path / "d.tsv", train={"eval_every": 2.5})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "run")]) == 2
    assert "train.eval_every must be a whole number of optimizer steps" in capsys.readouterr().err
