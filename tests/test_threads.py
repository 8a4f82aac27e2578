"""The thread count is chosen on purpose (--threads, OMP_NUM_THREADS, the CPUs shared among
processes), applied, and an oversubscribed machine is said."""

from __future__ import annotations

import os

import pytest
import torch
import yaml

from bistack.cli import main
from bistack.threads import choose_threads, oversubscription
from tests.conftest import tiny_config, tiny_sentences, write_conll


def test_the_choice_is_the_flag_then_the_environment_then_the_cpus_shared():
    assert choose_threads(3, "2", cpus=8) == 3
    assert choose_threads(None, "2", cpus=8) == 2
    assert choose_threads(None, None, cpus=8) == 8
    assert choose_threads(None, "", cpus=8, processes=2) == 4  # --devices 2 on CPU
    assert choose_threads(None, "junk", cpus=2, processes=4) == 1
    with pytest.raises(ValueError, match="--threads must be >= 1"):
        choose_threads(0, None, cpus=2)


def test_oversubscription_is_said_only_when_threads_outnumber_cpus():
    assert oversubscription(threads=2, processes=1, cpus=2, others_running=0) is None
    assert oversubscription(threads=1, processes=1, cpus=2, others_running=1) is None
    said = oversubscription(threads=2, processes=1, cpus=2, others_running=1)
    assert said is not None and "2 CPUs for 1 other running process, 2 threads" in said
    assert "--threads 1" in said
    assert "4 threads" in oversubscription(threads=2, processes=2, cpus=2, others_running=0)


def test_the_cli_applies_the_count_and_warns_a_run_that_cannot_fit(tmp_path, capsys):
    before, environment = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    try:
        train = write_conll(tmp_path / "train.txt", tiny_sentences(20, seed=0))
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(tiny_config(train, None, train={"max_epochs": 1})))
        output = tmp_path / "run"
        assert main(["train", str(path), "--output", str(output), "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        cpus = len(os.sched_getaffinity(0))
        args = ["evaluate", str(output / "model"), str(train), "--threads", str(cpus + 1)]
        assert main(args) == 0
        captured = capsys.readouterr()
        assert torch.get_num_threads() == cpus + 1
        assert f"{cpus + 1} threads of this run" in captured.err  # beside the scores on stdout
        with pytest.raises(SystemExit) as stopped:  # a usage error, as argparse says it
            main(["evaluate", str(output / "model"), str(train), "--threads", "0"])
        assert stopped.value.code == 2
        assert "argument --threads: must be >= 1, got 0" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)
        os.environ.pop("OMP_NUM_THREADS", None)
        if environment is not None:
            os.environ["OMP_NUM_THREADS"] = environment
