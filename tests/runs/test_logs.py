"""Logs a person and a machine can read: off a terminal no progress-bar frames, one line an
epoch; ``--log-format json`` one JSON object a line; the same progress flags on every command
that trains."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from bistack.cli import build_parser
from tests.conftest import tiny_config, tiny_sentences, write_conll
from tests.warm_commands import warm_bistack


@pytest.fixture
def config(tmp_path):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(60, seed=0))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tiny_config(train, None, train={"max_epochs": 2})))
    return path


def train(config, output, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*warm_bistack(), "train", str(config), "--output", str(output),
         *extra],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_off_a_terminal_each_epoch_is_one_line_and_no_bar_is_drawn(config, tmp_path):
    done = train(config, tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stdout + done.stderr and "it/s" not in done.stderr
    epochs = [line for line in done.stdout.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epochs] == ["epoch 1", "epoch 2"]


def test_json_logs_are_one_object_a_line(config, tmp_path):
    done = train(config, tmp_path / "run", "--log-format", "json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    assert {"train_loss", "dev_f1", "lr", "seconds", "best"} <= set(epochs[0])
    assert epochs[0]["best"] is True
    assert any(e["event"] == "message" and "best dev F1" in e["text"] for e in events)


@pytest.mark.parametrize("command", ["train", "demo", "ladder", "compare-poolers"])
def test_every_command_that_trains_takes_the_same_progress_flags(command):
    parser = build_parser()
    needs = [] if command == "demo" else ["config.yaml"]
    for flag, expected in (("--no-progress", (True, False)), ("--progress", (False, True))):
        args = parser.parse_args([command, *needs, flag])
        assert (args.no_progress, args.progress) == expected


@pytest.mark.parametrize("command", ["train", "ladder", "compare-poolers"])
def test_every_command_that_trains_runs_takes_the_log_format(command):
    args = build_parser().parse_args([command, "config.yaml", "--log-format", "json"])
    assert args.log_format == "json"


def test_a_ladder_in_json_is_one_object_a_line(tmp_path):
    from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(40, 0))
    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(10, 1))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(text_config(train, dev, train={"max_epochs": 1})))
    done = subprocess.run(
        [*warm_bistack(), "ladder", str(path), "--seeds", "1",
         "--output", str(tmp_path / "l"), "--log-format", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert sum(e["event"] == "epoch" for e in events) == 5  # one epoch for each of 5 rungs


def test_a_run_keeps_every_line_it_printed_in_its_folder(config, tmp_path):
    """Off a terminal too: train.log holds the run's lines, a resumed or replaced run's as its
    own; the first line says where the log goes and whether TensorBoard curves are written."""
    done = train(config, tmp_path / "run")
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "run" / "train.log").read_text().splitlines()
    printed = [line for line in done.stdout.splitlines() if line.strip()]
    assert [line for line in log if line.strip()] == printed
    assert printed[0].startswith(f"log in {tmp_path / 'run'}/train.log; metrics in ")
    assert "TensorBoard curves in" in printed[0]  # installed here: the dev extra has it
    assert (tmp_path / "run" / "tensorboard").is_dir()


def test_without_tensorboard_a_run_says_so_and_keeps_its_log(config, tmp_path, monkeypatch):
    """A user's environment without TensorBoard (the core install): no events, said at once."""
    import bistack.runs.loop as loop
    import bistack.runs.metrics_log as metrics_log
    from bistack import tasks
    from bistack.runs.driver import RunOptions
    from bistack.training import train_config

    monkeypatch.setattr(loop, "tensorboard_installed", lambda: False)
    monkeypatch.setattr(metrics_log, "tensorboard_installed", lambda: False)
    said = tasks.load_config(str(config), [])
    train_config(said, tmp_path / "run", RunOptions(progress=False))
    log = (tmp_path / "run" / "train.log").read_text().splitlines()
    assert "no TensorBoard curves (pip install 'bistack[tensorboard]' writes them)" in log[0]
    assert not (tmp_path / "run" / "tensorboard").exists()
    assert any(line.startswith("epoch 2:") for line in log)
