"""The learning rate over a run (Ma & Hovy's decay per epoch; a linear warm-up, then a linear
or a cosine decay to 0), read from each epoch's rows as a run logs them, and patience that
counts a gain only above ``train.min_delta``."""

from __future__ import annotations

import math

import pytest

from bistack.runs.optimizers import Schedule
from tests.runs.test_eval_every import run


@pytest.mark.parametrize("warmup", [0.0, 0.2])
def test_a_cosine_schedule_warms_up_then_follows_half_a_cosine_to_zero(warmup):
    total = 100
    schedule = Schedule(0.0, warmup, total, "cosine")
    steps = round(warmup * total)
    factors = [schedule.factor(1, step) for step in range(total)]
    assert factors[:steps] == pytest.approx([(s + 1) / steps for s in range(steps)])
    for step in range(steps, total):
        done = (step - steps) / (total - steps)
        assert factors[step] == pytest.approx(0.5 * (1 + math.cos(math.pi * done)))
    assert factors[steps] == pytest.approx(1.0) and factors[-1] < 0.01


def test_the_linear_schedule_is_as_it_was():
    assert Schedule(0.05, 0.0, 100).factor(3, 50) == pytest.approx(1 / 1.1)  # per epoch only
    linear = Schedule(0.0, 0.1, 100)
    assert linear.factor(1, 4) == pytest.approx(0.5)
    assert linear.factor(1, 55) == pytest.approx(0.5)  # 45 of the 90 decay steps left


def test_a_run_logs_the_cosine_rate_it_trains_with(tmp_path, capsys):
    rows, said = run(
        tmp_path, capsys, {"lr_decay": 0.0, "schedule": "cosine", "lr": 0.01}, max_epochs=4
    )
    assert "cosine to 0" in said
    rates = [float(row["lr"]) for row in rows]  # the rate of each epoch's last step
    expected = [0.01 * 0.5 * (1 + math.cos(math.pi * (8 * e - 1) / 32)) for e in (1, 2, 3, 4)]
    assert rates == pytest.approx(expected, rel=1e-6)


def test_a_gain_within_min_delta_does_not_reset_patience(tmp_path, capsys):
    """With a min_delta no gain can pass, patience runs out after the first validation's
    ``patience`` successors, whatever their scores; the best of them is still the model kept."""
    rows, said = run(tmp_path, capsys, max_epochs=10, patience=2, min_delta=1000.0)
    assert [int(row["epoch"]) for row in rows] == [1, 2, 3]
    assert "stopping after epoch 3: no dev improvement" in said
