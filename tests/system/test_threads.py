"""The thread count is chosen on purpose (--threads, OMP_NUM_THREADS, the CPUs shared among
processes), applied, and an oversubscribed machine is said."""

from __future__ import annotations

import os

import pytest
import torch
import yaml

from bistack.cli import main
from bistack.system.threads import choose_threads, oversubscription
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
    assert said is not None and "2 CPUs for 1 running thread of other programs, 2 threads" in said
    assert "--threads 1" in said
    assert "4 threads" in oversubscription(threads=2, processes=2, cpus=2, others_running=0)


def test_the_cli_applies_the_count_and_warns_a_run_that_cannot_fit(tmp_path, capsys, monkeypatch):
    import bistack.cli.predict

    seen: list[tuple[int, str | None]] = []  # (torch's threads, OMP_NUM_THREADS) in each run
    evaluate = bistack.cli.predict.run_evaluate

    def watched(args):
        seen.append((torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")))
        return evaluate(args)

    monkeypatch.setattr(bistack.cli.predict, "run_evaluate", watched)
    before, environment = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    train = write_conll(tmp_path / "train.txt", tiny_sentences(20, seed=0))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tiny_config(train, None, train={"max_epochs": 1})))
    output = tmp_path / "run"
    assert main(["train", str(path), "--output", str(output), "--threads", "1"]) == 0
    assert main(["evaluate", str(output / "model"), str(train), "--threads", "1"]) == 0
    cpus = len(os.sched_getaffinity(0))
    args = ["evaluate", str(output / "model"), str(train), "--threads", str(cpus + 1)]
    assert main(args) == 0
    assert seen == [(1, "1"), (cpus + 1, str(cpus + 1))]
    assert f"{cpus + 1} threads of this run" in capsys.readouterr().err  # beside the scores
    # Called from Python, the command leaves the process as it found it.
    assert torch.get_num_threads() == before
    assert os.environ.get("OMP_NUM_THREADS") == environment
    with pytest.raises(SystemExit) as stopped:  # a usage error, as argparse says it
        main(["evaluate", str(output / "model"), str(train), "--threads", "0"])
    assert stopped.value.code == 2
    assert "argument --threads: must be >= 1, got 0" in capsys.readouterr().err


def test_main_called_from_python_puts_back_the_environment_it_set(tmp_path, monkeypatch):
    from bistack.system.environment import MODEL_PROCESS_ENVIRONMENT

    for name in (*MODEL_PROCESS_ENVIRONMENT, "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's own value, kept as it was
    train = write_conll(tmp_path / "train.txt", tiny_sentences(10, seed=0))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tiny_config(train, None, train={"max_epochs": 1})))
    assert main(["train", str(path), "--output", str(tmp_path / "run"), "--threads", "1"]) == 0
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    left = [n for n in (*MODEL_PROCESS_ENVIRONMENT, "OMP_NUM_THREADS") if n in os.environ]
    assert left == ["HF_HUB_OFFLINE"]


def test_only_running_threads_of_other_programs_count_not_the_kernels(tmp_path):
    """A fake /proc: this process's own threads, a kernel thread, a sleeping one and two
    running threads of another program; only the last two count."""
    from bistack.system.threads import PF_KTHREAD, threads_running_elsewhere

    def task(pid: int, tid: int, state: str, flags: int = 0) -> None:
        folder = tmp_path / str(pid) / "task" / str(tid)
        folder.mkdir(parents=True)
        # pid (comm) state ppid pgrp session tty tpgid flags ...
        (folder / "stat").write_text(f"{tid} (a (b) c) {state} 1 1 1 0 -1 {flags} 0 0\n")

    task(os.getpid(), os.getpid(), "R")
    task(2, 2, "S", PF_KTHREAD)
    task(17, 17, "R", PF_KTHREAD)  # a kernel worker, running
    task(100, 100, "S")
    task(200, 200, "R")
    task(200, 201, "R")
    assert threads_running_elsewhere(tmp_path) == 2


def test_the_cpu_warning_comes_only_where_its_advice_applies(tmp_path, capsys, monkeypatch):
    """A training's warning counts other programs' threads only when bistack chose the count
    (after --threads the user has taken the advice), and comes after the config's checks: a
    config that fails says only why."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("bistack.system.threads.threads_running_elsewhere", lambda: 64)
    train = write_conll(tmp_path / "train.txt", tiny_sentences(10, seed=0))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tiny_config(train, None, train={"max_epochs": 1})))
    argv = ["train", str(path), "--no-progress"]
    assert main([*argv, "--output", str(tmp_path / "a"), "--threads", "1"]) == 0
    assert "warning: " not in capsys.readouterr().out
    assert main([*argv, "--output", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "warning: " in out and "64 running threads of other programs" in out
    assert out.index("warning: ") < out.index("epoch 1")
    assert main([*argv, "--output", str(tmp_path / "c"), "--set", "train.max_epochs=0"]) == 2
    captured = capsys.readouterr()
    assert "warning: " not in captured.out + captured.err and "max_epochs" in captured.err
