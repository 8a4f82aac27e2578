"""Progress a log can read: where no bar is drawn, a long stage (a frozen backbone's pass, an
epoch) says how far it is, its rate and the time left, at a steady cadence, and nothing more
often than that."""

import pytest

from bistack.models.frozen_pass import FLOAT32
from bistack.system import heartbeat
from bistack.system.heartbeat import Heartbeat


def test_a_line_at_most_every_cadence_with_the_rate_and_the_time_left(monkeypatch):
    clock = iter([0.0, 10.0, 29.0, 31.0, 40.0, 62.0])
    monkeypatch.setattr(heartbeat.time, "monotonic", lambda: next(clock))
    said: list[str] = []
    beat = Heartbeat("backbone", 1000, "texts", said.append)  # started at 0 s
    for _ in range(5):  # at 10, 29, 31, 40 and 62 s: 100 texts each
        beat.update(100)
    assert said == [
        "backbone: 300 of 1,000 texts (9.7/s, about 72 s left)",
        "backbone: 500 of 1,000 texts (8.1/s, about 62 s left)",
    ]


@pytest.fixture
def every_step(monkeypatch):
    monkeypatch.setattr(heartbeat, "SECONDS", 0.0)


@pytest.mark.usefixtures("every_step")
def test_a_frozen_backbones_pass_says_how_far_it_is(tmp_path):
    from bistack.models.backbone import TransformerBackbone
    from tests.fixtures.written_models.make_fixtures import tiny_transformer

    backbone = TransformerBackbone.load(str(tiny_transformer(tmp_path / "tiny")))
    said: list[str] = []
    texts = [f"text number {i}" for i in range(10)]
    backbone.layer_vectors(texts, "truncate", batch_size=4, say=said.append, frozen=FLOAT32)
    assert said[-1].startswith("backbone: 10 of 10 texts (") and "left)" in said[-1]
    quiet: list[str] = []
    backbone.layer_vectors(
        texts, "truncate", batch_size=4, progress=True, say=quiet.append, frozen=FLOAT32
    )
    assert quiet == []  # a bar is drawn instead


@pytest.mark.usefixtures("every_step")
def test_an_epoch_off_a_terminal_says_how_far_it_is(tmp_path, capsys):
    import yaml

    from bistack.cli import main
    from tests.cv.test_cross_validation import write_rows
    from tests.text_models.test_end_to_end import text_config

    train = write_rows(tmp_path / "train.tsv", 40)
    config = text_config(train, None, train={"max_epochs": 1, "batch_size": 8})
    config["data"] |= {"dev": None, "dev_fraction": 0.2}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if " batches (" in line]
    assert lines and lines[-1].startswith("epoch 1/1: 4 of 4 batches (")
