"""A run into a new output with TensorBoard importable (as in most ML environments) keeps
writing its curve after its first best model moves the staging folder into place; without
TensorBoard the run is the same, minus the event files."""

from __future__ import annotations

import sys

import pytest
import yaml

from bistack.cli import main
from tests.conftest import tiny_config

EPOCHS = 4


def train(tiny_conll, tmp_path, capsys) -> tuple[int, str]:
    train_path, dev_path = tiny_conll
    config = tiny_config(train_path, dev_path, train={"max_epochs": EPOCHS, "patience": EPOCHS})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main(["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"])
    return code, capsys.readouterr().err


def test_with_tensorboard_every_epoch_reaches_the_output(tiny_conll, tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code, err = train(tiny_conll, tmp_path, capsys)
    assert code == 0, err
    assert "No such file or directory" not in err
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    steps = [event.step for event in events.Scalars("dev_f1")]
    assert steps == list(range(1, EPOCHS + 1))
    assert not list(tmp_path.glob(".run.staging-*"))  # nothing left beside the output


def test_without_tensorboard_the_run_is_the_same(tiny_conll, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import fails
    with pytest.raises(ImportError):
        import tensorboard.compat.proto.event_pb2  # noqa: F401
    code, err = train(tiny_conll, tmp_path, capsys)
    assert code == 0, err
    assert not (tmp_path / "run" / "tensorboard").exists()
    rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    assert len(rows) == EPOCHS + 1


def test_the_records_are_framed_as_tensorboards_own_writer_frames_them():
    import random

    from tensorboard.summary.writer.record_writer import RecordWriter

    from bistack.runs.tensorboard import tfrecord

    class Collected:
        def __init__(self) -> None:
            self.data = b""

        def write(self, data: bytes) -> None:
            self.data += data

    rng = random.Random(0)
    for size in (0, 1, 7, 300):
        data = bytes(rng.randrange(256) for _ in range(size))
        theirs = Collected()
        RecordWriter(theirs).write(data)
        assert tfrecord(data) == theirs.data


def test_a_resumed_run_drops_the_steps_it_writes_again(tmp_path):
    """Killed after epoch 5 with its checkpoint at epoch 3, a run resumes from 3: the event
    files hold epochs 4 and 5 once, as metrics.csv does (a kill mid-record included)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from bistack.runs.tensorboard import FOLDER, ScalarEvents, keep_until

    first = ScalarEvents()
    for step in range(1, 6):
        first.write(tmp_path, {"dev_f1": step / 10}, step)
    [written] = (tmp_path / FOLDER).glob("events.out.tfevents.*")
    with written.open("ab") as handle:
        handle.write(b"\x40\x00\x00\x00\x00\x00\x00\x00cut")  # a record the kill cut short
    keep_until(tmp_path, 3)
    again = ScalarEvents()
    again.name += ".resumed"
    for step in (4, 5):
        again.write(tmp_path, {"dev_f1": step / 10}, step)
    steps = [
        event.step
        for path in sorted((tmp_path / FOLDER).glob("events.out.tfevents.*"))
        for event in EventFileLoader(str(path)).Load()
        if event.summary.value
    ]
    assert sorted(steps) == [1, 2, 3, 4, 5]
