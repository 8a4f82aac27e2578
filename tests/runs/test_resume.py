"""Training a user can stop and resume: a run killed after an epoch and resumed with --resume
ends exactly where the uninterrupted run ends (weights bit for bit, the same metrics.csv)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tests.conftest import tiny_config, tiny_sentences, write_conll
from tests.warm_commands import warm_bistack

FRESH_BISTACK = [sys.executable, "-m", "bistack"]  # where a kill of the process is the point
EPOCHS = 5


def bistack(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([*warm_bistack(), *args], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def metrics_without_time(run: Path) -> list[dict[str, str]]:
    """metrics.csv rows; the seconds column is wall time, which no two runs share."""
    with (run / "metrics.csv").open() as handle:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(handle)]


def resume_config(root: Path, lr: float = 0.05, **train: float) -> Path:
    """A small tagger with dropout, <unk> replacement, SGD momentum and lr decay: every state
    a resumed run must restore to end bit for bit where the uninterrupted one does."""
    train_path = write_conll(root / "train.txt", tiny_sentences(300, seed=0))
    dev = write_conll(root / "dev.txt", tiny_sentences(40, seed=1))
    settings = tiny_config(
        train_path,
        dev,
        optimizer={"name": "sgd", "lr": lr, "momentum": 0.9, "lr_decay": 0.1},
        train={"max_epochs": EPOCHS, "patience": EPOCHS, "batch_size": 4, **train},
    )
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def train_whole(config: Path, run: Path) -> Path:
    done = bistack("train", str(config), "--output", str(run), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert not (run / "checkpoint.safetensors").exists(), "a finished run keeps no checkpoint"
    return run


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    return resume_config(tmp_path_factory.mktemp("resume"))


@pytest.fixture(scope="module")
def uninterrupted(config, tmp_path_factory) -> Path:
    return train_whole(config, tmp_path_factory.mktemp("whole") / "run")


def kill_after(config: Path, run: Path, after_epoch: int) -> None:
    """Train ``config`` into ``run`` and SIGKILL it once it has finished ``after_epoch`` epochs
    and checkpointed them."""
    process = subprocess.Popen(
        [*FRESH_BISTACK, "train", str(config), "--output", str(run), "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    metrics, checkpoint = run / "metrics.csv", run / "checkpoint.safetensors"
    deadline = time.monotonic() + 240
    while not (
        checkpoint.exists() and metrics.exists() and len(metrics_without_time(run)) >= after_epoch
    ):
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert len(metrics_without_time(run)) < EPOCHS, "killed too late to prove anything"


def resume(config: Path, run: Path) -> None:
    done = bistack("train", str(config), "--output", str(run), "--no-progress", "--resume")
    assert done.returncode == 0, done.stderr
    assert "resumed after epoch" in done.stdout
    assert not (run / "checkpoint.safetensors").exists()


def assert_same_run(run: Path, whole: Path) -> None:
    resumed = load_file(run / "model" / "model.safetensors")
    expected = load_file(whole / "model" / "model.safetensors")
    assert resumed.keys() == expected.keys()
    for name, tensor in expected.items():
        assert tensor.equal(resumed[name]), f"{name} differs after resuming"
    assert metrics_without_time(run) == metrics_without_time(whole)


@pytest.mark.parametrize("after_epoch", [1, 3])
def test_a_run_killed_after_an_epoch_resumes_to_the_same_weights(
    config, uninterrupted, tmp_path, after_epoch
):
    kill_after(config, tmp_path / "run", after_epoch)
    resume(config, tmp_path / "run")
    assert_same_run(tmp_path / "run", uninterrupted)


def test_a_run_that_averages_its_weights_resumes_to_the_same_average(tmp_path):
    """train.weight_average: the running average travels in the checkpoint, so the resumed
    run's dev scores and best model are the uninterrupted run's. A low rate keeps dev F1 rising
    past the kill (dev F1 63, 67, 93, 100, 100), so the model kept is one the resumed run made."""
    config = resume_config(tmp_path, lr=0.005, weight_average=0.9)
    whole = train_whole(config, tmp_path / "whole")
    kill_after(config, tmp_path / "run", 2)
    resume(config, tmp_path / "run")
    assert_same_run(tmp_path / "run", whole)


def test_a_checkpoint_written_before_a_setting_existed_resumes(config, uninterrupted, tmp_path):
    """A run checkpointed by an earlier version, whose config lacks a key added since (here
    train.weight_average), resumes with the key's default rather than being refused."""
    run = tmp_path / "run"
    kill_after(config, run, 1)
    path = run / "checkpoint.safetensors"
    with safe_open(path, "pt") as handle:
        meta = json.loads(handle.metadata()["bistack"])
    del meta["config"]["train"]["weight_average"]
    save_file(load_file(path), path, metadata={"bistack": json.dumps(meta)})
    resume(config, run)
    assert_same_run(run, uninterrupted)


@pytest.mark.slow
def test_resume_refuses_what_it_cannot_continue(config, uninterrupted, tmp_path):
    nothing = bistack("train", str(config), "--output", str(tmp_path / "new"), "--resume")
    assert nothing.returncode == 2
    assert "no checkpoint to resume from" in nothing.stderr
    finished = bistack("train", str(config), "--output", str(uninterrupted), "--resume")
    assert finished.returncode == 2 and "no checkpoint" in finished.stderr

    run = tmp_path / "run"
    process = subprocess.Popen(
        [*FRESH_BISTACK, "train", str(config), "--output", str(run), "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while not (run / "checkpoint.safetensors").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    changed = bistack(
        "train", str(config), "--output", str(run), "--resume", "--set", "optimizer.lr=0.5"
    )
    assert changed.returncode == 2
    assert "optimizer.lr (0.05 -> 0.5)" in changed.stderr
    both = bistack("train", str(config), "--output", str(run), "--resume", "--overwrite")
    assert both.returncode == 2 and "overwrite (--overwrite) replaces it" in both.stderr
