"""``bistack tune``: a space is checked against the config before any trial; a tiny search
finishes, prunes a learning rate that cannot learn, resumes after a kill without rerunning what
finished, shares one study between two processes without losing or repeating a trial, and
writes a best.yaml that ``bistack train`` takes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from tests.conftest import tiny_config, tiny_sentences, write_conll

pytest.importorskip("optuna", reason="tune runs on Optuna (pip install 'bistack[tune]')")


@pytest.fixture
def tagger_yaml(tmp_path: Path) -> Path:
    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(12, seed=1))
    config = tiny_config(train, dev, train={"max_epochs": 2, "patience": 2})
    path = tmp_path / "tagger.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def space_file(tmp_path: Path, space: dict) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def tune(*args: str) -> int:
    return main(["tune", *args, "--threads", "1"])


@pytest.mark.parametrize(
    ("space", "named"),
    [
        ({"encoder.hiden_size": [8, 32]}, "unknown key 'encoder.hiden_size'"),
        ({"optimizer.lr": [0.1, 0.01]}, "optimizer.lr: a range needs low < high"),
        ({"optimizer.lr": {"log": [0, 0.1]}}, "optimizer.lr: a log range needs low > 0"),
        ({"features.char_encoder": ["lstm", "cnn"]}, "features.char_encoder takes one of"),
        ({"features.char_encoder": {"choice": ["lstm", "gru2"]}}, "features.char_encoder must"),
        ({"encoder.hidden_size": [8.5, 32]}, "encoder.hidden_size takes whole numbers"),
        ({"encoder.outer_dropout": [0.2, 1.5]}, "encoder.outer_dropout must be >= 0.0"),
        ({"optimizer.lr": {"choice": [0.1, "fast"]}}, "optimizer.lr must be float"),
        ({"train.seed": [1, 5]}, "train.seed is not searched"),
        ({"optimizer.lr": {"between": [1, 2]}}, "give exactly one of log, range or choice"),
    ],
)
def test_a_space_the_config_cannot_take_is_refused_before_any_trial(
    tagger_yaml, tmp_path, capsys, space, named
):
    path = space_file(tmp_path, space)
    output = tmp_path / "search"
    assert (
        tune(str(tagger_yaml), "--space", str(path), "--trials", "2", "--output", str(output)) == 2
    )
    error = capsys.readouterr().err
    assert str(path) in error and named in error, error
    assert not output.exists()  # no study, no trial


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("optimizer.lr=0.1", "optimizer.lr is searched"),
        ("train.seed=4", "train.seed is the same for both configs"),
        ("train.max_epoch=40", "unknown key 'train.max_epoch'"),
        ("train.max_epochs", "expected key=value"),
    ],
)
def test_a_verdict_setting_that_would_change_what_is_judged_is_refused_before_any_trial(
    tagger_yaml, tmp_path, capsys, setting, named
):
    path = space_file(tmp_path, {"optimizer.lr": {"log": [1e-3, 1e-1]}})
    output = tmp_path / "search"
    code = tune(str(tagger_yaml), "--space", str(path), "--trials", "2", "--output", str(output),
                "--verdict-set", setting)  # fmt: skip
    assert code == 2
    error = capsys.readouterr().err
    assert "--verdict-set" in error and named in error, error
    assert not output.exists()


def test_a_tiny_search_prunes_what_cannot_learn_and_its_best_config_trains(
    tagger_yaml, tmp_path, capsys
):
    space = space_file(tmp_path, {"optimizer.lr": {"choice": [0.01, 1e-9]}})
    output = tmp_path / "search"
    code = tune(
        str(tagger_yaml), "--space", str(space), "--trials", "4", "--startup-trials", "1",
        "--sampler-seed", "3", "--seeds", "2", "--output", str(output),
        "--verdict-set", "train.max_epochs=3",
    )  # fmt: skip
    assert code == 0
    report = json.loads((output / "tune.json").read_text())
    trials = report["trials"]
    assert len(trials) == 4 and trials[0]["note"] == "the starting config"
    hopeless = [t for t in trials if t["params"]["optimizer.lr"] == 1e-9]
    assert hopeless, "the seeded sampler drew the hopeless rate"
    for trial in hopeless:  # the median of what learns is far above: stopped after epoch 1
        assert trial["state"] == "pruned" and trial["epochs"] == 1, trial
    assert all((output / t["directory"] / "model").is_dir() for t in trials)
    assert report["verdict"] is not None
    for name in ("tune.md", "tune-history.png", "tune-params.png", "tune.log"):
        assert (output / name).stat().st_size > 0
    log = capsys.readouterr().out
    assert "trial 3 (4 of 4 done)" in log and "best so far" in log
    best = yaml.safe_load((output / "best.yaml").read_text())
    assert best["optimizer"]["lr"] == 0.01
    assert main(["train", str(output / "best.yaml"), "--output", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "model" / "config.json").is_file()


def test_the_verdict_runs_and_best_yaml_get_the_full_budget_the_trials_did_not(
    tagger_yaml, tmp_path
):
    space = space_file(tmp_path, {"optimizer.lr": {"choice": [0.02, 0.05]}})  # start (0.01) apart
    output = tmp_path / "search"
    code = tune(
        str(tagger_yaml), "--space", str(space), "--trials", "2", "--seeds", "1",
        "--output", str(output), "--verdict-set", "train.max_epochs=3",
    )  # fmt: skip
    assert code == 0
    report = json.loads((output / "tune.json").read_text())
    assert report["verdict_set"] == ["train.max_epochs=3"]
    assert all(t["epochs"] <= 2 for t in report["trials"])
    trained_with = {t["config"]["train"]["seed"] for t in report["trials"] if "config" in t}
    for side in ("start", "best"):
        [run] = (output / "verdict" / side).glob("seed*/result.json")
        record = json.loads(run.read_text())
        assert record["config"]["train"]["max_epochs"] == 3, side
        # A fresh seed: the winning trial's own run does not count again in its verdict.
        assert record["config"]["train"]["seed"] not in trained_with | {1}, side
    best = yaml.safe_load((output / "best.yaml").read_text())
    assert best["train"]["max_epochs"] == 3 and best["optimizer"]["lr"] in (0.02, 0.05)
    assert "train.max_epochs=3" in (output / "tune.md").read_text()


def test_trials_that_cannot_run_are_recorded_with_their_error_and_the_search_goes_on(
    tagger_yaml, tmp_path, capsys
):
    config = yaml.safe_load(tagger_yaml.read_text())
    config["data"]["dev"] = str(tmp_path / "missing-dev.txt")
    tagger_yaml.write_text(yaml.safe_dump(config))
    space = space_file(tmp_path, {"encoder.outer_dropout": [0.1, 0.6]})
    output = tmp_path / "search"
    capsys.readouterr()
    assert (
        tune(str(tagger_yaml), "--space", str(space), "--trials", "2", "--output", str(output)) == 2
    )  # a search where every trial failed has no best config: it says so, and fails
    assert "no trial completed, so there is no best config" in capsys.readouterr().err
    trials = json.loads((output / "tune.json").read_text())["trials"]
    assert [t["state"] for t in trials] == ["failed", "failed"]
    assert all("missing-dev.txt" in t["error"] for t in trials)
    assert "## Errors" in (output / "tune.md").read_text()
    assert not (output / "best.yaml").exists()


def command(tagger_yaml: Path, space: Path, output: Path, trials: int) -> list[str]:
    return [
        sys.executable, "-m", "bistack", "tune", str(tagger_yaml), "--space", str(space),
        "--trials", str(trials), "--seeds", "0", "--no-prune", "--output", str(output),
        "--threads", "1",
    ]  # fmt: skip


def test_a_killed_search_resumes_without_rerunning_finished_trials(tagger_yaml, tmp_path, capsys):
    space = space_file(tmp_path, {"encoder.outer_dropout": [0.1, 0.6]})
    output = tmp_path / "search"
    first = subprocess.Popen(command(tagger_yaml, space, output, 3))
    log = output / "tune.log"
    deadline = time.monotonic() + 120
    while "trial 1 started" not in (log.read_text() if log.exists() else ""):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # inside trial 1: a trial needs seconds to set up
    first.wait()
    finished = output / "trials" / "trial-0000" / "model" / "model.safetensors"
    before = finished.stat().st_mtime_ns
    resume = command(tagger_yaml, space, output, 3)[3:]  # the same command, in this process
    # With another config the study refuses to go on, naming why.
    assert main([*resume, "--set", "train.max_epochs=3"]) == 2
    assert "another config (changed: train.max_epochs (2 -> 3))" in capsys.readouterr().err
    assert main(resume) == 0
    assert "trial 1 was interrupted" in capsys.readouterr().out
    trials = json.loads((output / "tune.json").read_text())["trials"]
    states = [t["state"] for t in trials]
    assert states.count("complete") == 3 and states.count("interrupted") == 1, states
    interrupted = next(t for t in trials if t["state"] == "interrupted")
    retried = next(
        t for t in trials if t["note"] == f"trial {interrupted['number']}'s values again"
    )
    assert retried["params"] == interrupted["params"]
    assert finished.stat().st_mtime_ns == before  # trial 0 was not trained again
    assert log.read_text().count("trial 0 started") == 1


@pytest.mark.slow
def test_two_processes_on_one_study_neither_lose_nor_repeat_a_trial(tagger_yaml, tmp_path):
    import optuna

    space = space_file(tmp_path, {"encoder.outer_dropout": [0.1, 0.6]})
    output = tmp_path / "search"
    processes = [subprocess.Popen(command(tagger_yaml, space, output, 6)) for _ in range(2)]
    assert [p.wait(timeout=300) for p in processes] == [0, 0]
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{output / 'study.db'}")
    trials = [t for t in study.get_trials() if not t.user_attrs.get("surplus")]
    assert [t.state.name for t in trials] == ["COMPLETE"] * 6
    assert len({t.user_attrs["worker"] for t in trials}) == 2  # both processes ran trials
    started = (output / "tune.log").read_text()
    for trial in trials:  # each ran once, into a directory of its own
        assert started.count(f"trial {trial.number} started") == 1
        assert (output / trial.user_attrs["directory"] / "model" / "config.json").is_file()
    assert sorted(
        t["number"] for t in json.loads((output / "tune.json").read_text())["trials"]
    ) == list(range(6))


def test_a_seeded_search_that_goes_on_draws_new_values_not_its_first_trials_again(
    tagger_yaml, tmp_path
):
    """A seeded sampler starts its draws over in each process: going on from a stopped search,
    it proposed the values of the search's first trials again."""
    from bistack.metrics.dev import Metric
    from bistack.studies.search_space import read_space
    from bistack.studies.tune import TuneSettings, open_study
    from bistack.tasks import load_config

    config = load_config(tagger_yaml, [])
    space = read_space(space_file(tmp_path, {"optimizer.lr": {"log": [1e-4, 1e-1]}}), config)
    settings = TuneSettings(trials=10, sampler_seed=7)
    metric = Metric("dev_f1", "dev F1", higher_is_better=True)
    first = open_study(tmp_path, settings, config, space, metric)
    drawn = []
    for _ in range(3):
        trial = first.ask()
        drawn.append(space[0].suggest(trial))
        first.tell(trial, 0.5)
    again = open_study(tmp_path, settings, config, space, metric)  # as a new process would
    proposed = space[0].suggest(again.ask())
    assert proposed not in drawn


def test_trial_processes_train_where_and_how_the_search_was_asked_to():
    """``--accelerator`` and ``--precision`` reach every worker's trials and the verdict runs;
    each worker searches the one study, with a sampler seed of its own."""
    from bistack.studies.tune import TuneSettings, worker_settings

    settings = TuneSettings(trials=4, accelerator="cuda", precision="bf16-mixed", sampler_seed=3)
    workers = [worker_settings(Path("out"), settings, i) for i in range(2)]
    assert {(w.accelerator, w.precision) for w in workers} == {("cuda", "bf16-mixed")}
    assert {w.storage for w in workers} == {f"sqlite:///{Path('out').resolve() / 'study.db'}"}
    assert [w.sampler_seed for w in workers] == [3, 4]
    options = settings.run_options()
    assert (options.accelerator, options.precision, options.checkpoints) == (
        "cuda",
        "bf16-mixed",
        False,
    )


def test_worker_processes_share_one_study_and_count_its_trials(tagger_yaml, tmp_path, capsys):
    """``--workers 2``: two spawned processes search one study (neither re-enters the
    command line), every trial counts once, each was run by one of them, and the report
    follows in this process."""
    import optuna

    space = space_file(tmp_path, {"encoder.outer_dropout": [0.1, 0.6]})
    output = tmp_path / "search"
    argv = [str(tagger_yaml), "--space", str(space), "--trials", "4", "--seeds", "0"]
    assert tune(*argv, "--no-prune", "--output", str(output), "--workers", "2") == 0
    assert "searching with 2 worker processes" in capsys.readouterr().out
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{output / 'study.db'}")
    trials = [t for t in study.get_trials() if not t.user_attrs.get("surplus")]
    assert [t.state.name for t in trials] == ["COMPLETE"] * 4
    workers = {t.user_attrs["worker"].split(":")[1] for t in trials}
    assert str(os.getpid()) not in workers  # searched in the workers, not here
    assert (output / "tune.json").is_file()
