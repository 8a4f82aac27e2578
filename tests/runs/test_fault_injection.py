"""Fault injection: a failed, interrupted, killed, diverging or concurrent run never harms a
model that exists. Each test runs the real command line as a subprocess, then checks the exit
status, the one-line message, that no traceback was printed, and the old model byte for byte."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bistack.api import Tagger
from tests.conftest import tiny_config, tiny_sentences, with_ctrl_c, write_conll
from tests.warm_commands import warm_bistack

FRESH_BISTACK = [sys.executable, "-m", "bistack"]  # where the process is killed or its pid named
TEXTS = ["Anna visited Paris yesterday .", "Peter left New York"]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def bistack(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*warm_bistack(), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def predictions(model_dir: Path) -> list:
    return [[s.tags for s in text] for text in Tagger.load(model_dir).predict(TEXTS)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, Path]:
    """A finished tagger run, and data for more runs (copy the run before changing it)."""
    root = tmp_path_factory.mktemp("nothing-lost")
    train = write_conll(root / "train.txt", tiny_sentences(120, seed=0))
    dev = write_conll(root / "dev.txt", tiny_sentences(30, seed=1))
    big = write_conll(root / "big.txt", tiny_sentences(4000, seed=2))
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(train, dev, train={"max_epochs": 1})))
    slow = root / "slow.yaml"
    settings = tiny_config(big, dev, train={"max_epochs": 1000, "patience": 1000})
    settings["encoder"]["hidden_size"] = 64
    slow.write_text(yaml.safe_dump(settings))
    run = root / "run"
    assert bistack("train", str(config), "--output", str(run), "--no-progress").returncode == 0
    return {"root": root, "config": config, "slow": slow, "run": run, "dev": dev}


def copy_of(trained: dict[str, Path], tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(trained["run"], tmp_path / "run"))


def test_a_rerun_without_overwrite_is_refused_and_changes_nothing(trained, tmp_path):
    run = copy_of(trained, tmp_path)
    before = snapshot(run)
    done = bistack("train", str(trained["config"]), "--output", str(run), "--no-progress")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {run} already holds a model; give --overwrite to replace it (the old one stays "
        "until the new run has its first best model), or choose another --output"
    ]
    assert snapshot(run) == before


def test_overwrite_never_takes_a_file_the_user_kept_in_the_model_folder(trained, tmp_path):
    """The new model replaces OUTPUT/model whole: a file bistack did not write there would go
    with the old model, so the run is refused before it starts, and nothing changes; what a
    killed save of bistack's left there is no reason to refuse."""
    run = copy_of(trained, tmp_path)
    (run / "model" / "notes.md").write_text("what I found about this model")
    before = snapshot(run)
    argv = ["train", str(trained["config"]), "--output", str(run), "--no-progress"]
    done = bistack(*argv, "--overwrite")
    assert done.returncode == 2
    assert "holds files bistack did not write there (model/notes.md)" in done.stderr
    assert snapshot(run) == before
    (run / "model" / "notes.md").unlink()
    # What a run killed while saving its weights leaves beside them is bistack's own: it goes.
    stale = run / "model" / ".model.safetensors.bistack-tmp-k7x2q9ab"
    stale.write_bytes(b"half a file")
    assert bistack(*argv, "--overwrite").returncode == 0
    assert not stale.exists()


def test_a_retrain_that_fails_a_data_check_leaves_the_old_model(trained, tmp_path):
    run = copy_of(trained, tmp_path)
    before, predicted = snapshot(run), predictions(run / "model")
    bad_dev = write_conll(tmp_path / "dev.txt", [[("Anna", "I-PER"), ("Kiel", "I-CITY")]])
    config = yaml.safe_load(trained["config"].read_text())
    config["data"]["dev"] = str(bad_dev)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    done = bistack("train", str(path), "--output", str(run), "--overwrite", "--no-progress")
    assert done.returncode == 2 and "entity type 'CITY'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert snapshot(run) == before and predictions(run / "model") == predicted
    assert not list(tmp_path.glob(".run.bistack-staging-*"))  # a failed run clears its staging


def test_a_failed_retrain_of_a_calibrated_regressor_keeps_its_calibration(tmp_path):
    rows = "".join(f"{'x ' * (i % 7 + 1)}\t{i % 7}\n" for i in range(80))
    table = tmp_path / "scores.tsv"
    table.write_text("sentence\tlabel\n" + rows)
    config = {
        "kind": "regressor",
        "data": {"train": str(table), "text_column": "sentence", "tokenizer": "whitespace"},
        "features": {"word_dim": 8, "char_encoder": "none", "casing_dim": 0},
        "encoder": {"hidden_size": 8},
        "pooling": {"type": "mean"},
        "regression": {"calibrate": True},
        "train": {"max_epochs": 2},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    assert bistack("train", str(path), "--output", str(run), "--no-progress").returncode == 0
    before = snapshot(run)
    assert b"calibration" in before["model/config.json"]
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\n" + rows + "x x\tmany\n")
    config["data"]["dev"] = str(bad)
    path.write_text(yaml.safe_dump(config))
    done = bistack("train", str(path), "--output", str(run), "--overwrite", "--no-progress")
    assert done.returncode == 2 and "row 81" in done.stderr
    assert snapshot(run) == before


def wait_for(predicate, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def start_slow(trained: dict[str, Path], run: Path, *extra: str) -> subprocess.Popen:
    command = ["train", str(trained["slow"]), "--output", str(run), "--no-progress", *extra]
    return subprocess.Popen(
        [*FRESH_BISTACK, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=with_ctrl_c,
    )


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGKILL])
def test_a_retrain_stopped_before_its_first_best_model_leaves_the_old_one(trained, tmp_path, sent):
    run = copy_of(trained, tmp_path)
    before = snapshot(run)
    process = start_slow(trained, run, "--overwrite")
    staged = tmp_path / f".run.bistack-staging-{process.pid}" / "model" / "config.json"
    wait_for(staged.exists)  # data read, model built: now in its first epoch
    process.send_signal(sent)
    out, err = process.communicate(timeout=60)
    assert snapshot(run) == before
    if sent == signal.SIGINT:
        assert process.returncode == 130 and "Traceback" not in err
        assert f"interrupted: no model was saved, and {run} is as it was" in out


@pytest.mark.slow
def test_kills_at_random_points_always_leave_a_whole_loadable_model(trained, tmp_path):
    run = copy_of(trained, tmp_path)
    old = snapshot(run / "model")
    rng = random.Random(0)
    for sent in (signal.SIGKILL, signal.SIGINT, signal.SIGKILL, signal.SIGINT):
        process = start_slow(trained, run, "--overwrite")
        time.sleep(rng.uniform(2.0, 12.0))
        process.send_signal(sent)
        process.communicate(timeout=60)
        now = snapshot(run / "model")
        assert now == old or {"config.json", "vocab.json", "model.safetensors"} <= set(now)
        assert len(predictions(run / "model")) == len(TEXTS)  # loads and predicts
        rows = (run / "metrics.csv").read_text().splitlines()[1:]
        epochs = [int(row.split(",")[0]) for row in rows]
        assert epochs == list(range(1, len(epochs) + 1))  # one run's rows, never two mixed


def test_a_kill_during_the_swap_never_leaves_the_output_without_a_model(tmp_path):
    """A process swaps two model directories back and forth as fast as it can; killed at
    random moments, the output always holds one of them whole."""
    for name, content in (("a", b"first"), ("b", b"second")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(content)
    script = (
        "import sys; from pathlib import Path; from bistack.files.swap import exchange\n"
        "a, b = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "print('ready', flush=True)\n"
        "while True: exchange(a, b)\n"
    )
    rng = random.Random(1)
    for _ in range(5):
        process = subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / "a"), str(tmp_path / "b")],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.01, 0.3))
        process.kill()
        process.wait()
        contents = {(tmp_path / n / "model.safetensors").read_bytes() for n in ("a", "b")}
        assert contents == {b"first", b"second"}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_a_run_in_progress_is_named_before_the_model_it_has_already_written(tmp_path):
    from bistack.runs.rundir import OutputError, RunDirectory, check_output

    output = tmp_path / "run"
    running = RunDirectory.open(output, overwrite=False)  # holds the lock, as a run does
    try:
        (output / "model").mkdir(parents=True)  # its first best model, already committed
        with pytest.raises(OutputError, match="is in use by another training run"):
            check_output(output, overwrite=False)  # not "give --overwrite"
    finally:
        running.close()
    with pytest.raises(OutputError, match="already holds a model"):
        check_output(output, overwrite=False)


def test_a_second_run_into_the_same_output_fails_at_once_naming_the_first(trained, tmp_path):
    run = tmp_path / "run"
    first = start_slow(trained, run)
    lock = tmp_path / ".run.bistack-lock"
    wait_for(lambda: lock.exists() and str(first.pid) in lock.read_text())
    started = time.monotonic()
    done = bistack("train", str(trained["config"]), "--output", str(run), "--no-progress")
    assert done.returncode == 2 and time.monotonic() - started < 60
    assert f"{run} is in use by another training run (pid {first.pid}, started " in done.stderr
    # The first run is killed; its lock dies with it, and the next run says it cleared it.
    first.kill()
    first.wait()
    args = ["train", str(trained["config"]), "--output", str(run), "--no-progress"]
    done = bistack(*args, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert f"cleared a stale lock of a run that no longer runs (pid {first.pid}" in done.stdout
    assert not list(tmp_path.glob(".run.bistack-staging-*"))
    assert len(predictions(run / "model")) == len(TEXTS)


def test_a_diverging_run_stops_with_the_epoch_and_step_and_keeps_the_old_model(trained, tmp_path):
    run = copy_of(trained, tmp_path)
    before = snapshot(run)
    args = ["--set", "optimizer.name=sgd", "--set", "optimizer.lr=1e10"]
    args += ["--set", "optimizer.grad_clip=0", "--set", "train.max_epochs=3"]
    done = bistack(
        "train", str(trained["config"]), "--output", str(run), "--overwrite", *args,
        "--no-progress",
    )  # fmt: skip
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: training diverged at epoch 1, step ")
    assert "lower optimizer.lr (now 1e+10)" in line and "is as it was" in line
    assert snapshot(run) == before


def test_an_extreme_target_is_a_clear_error_not_a_model_without_weights(tmp_path):
    rows = "".join(f"{'x ' * (i % 5 + 1)}\t{1e308 if i == 3 else i % 5}\n" for i in range(60))
    table = tmp_path / "t.tsv"
    table.write_text("sentence\tlabel\n" + rows)
    config = {
        "kind": "regressor",
        "data": {"train": str(table), "text_column": "sentence", "tokenizer": "whitespace"},
        "features": {"word_dim": 8, "char_encoder": "none", "casing_dim": 0},
        "encoder": {"hidden_size": 8},
        "train": {"max_epochs": 2},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    done = bistack("train", str(path), "--output", str(tmp_path / "run"), "--no-progress")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: training diverged at epoch 1, step 1: the loss is nan")
    assert "check the targets for extreme values" in line
    assert not (tmp_path / "run").exists()  # never a directory without weights


def test_the_lock_and_staging_live_beside_the_output_not_in_it(trained, tmp_path):
    run = tmp_path / "fresh"
    done = bistack("train", str(trained["config"]), "--output", str(run), "--no-progress")
    assert done.returncode == 0
    assert sorted(set(os.listdir(run)) - {"tensorboard"}) == ["metrics.csv", "model", "train.log"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".fresh.bistack-lock", "fresh"]


@pytest.mark.parametrize("when", ["before the first epoch", "while finishing"])
def test_an_interrupt_outside_the_epochs_still_says_what_the_run_leaves(tmp_path, capsys, when):
    """Ctrl-C between staging and the first epoch, or after the last best model was saved,
    gets the same one line as one during an epoch, and the truth about what is on disk."""
    from bistack import tasks
    from bistack.runs.driver import RunOptions, train_model

    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(10, seed=1))
    config = tasks.config_from_dict(tiny_config(train, dev, train={"max_epochs": 1}))
    task = tasks.task_of("tagger")

    def interrupted(config, run, **inputs):
        prepared = task.prepare(config, run, **inputs)
        if when == "before the first epoch":
            raise KeyboardInterrupt
        prepared.finish = lambda run: (_ for _ in ()).throw(KeyboardInterrupt)
        return prepared

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train_model(config, run, interrupted, task.metric, RunOptions(progress=False))
    out = capsys.readouterr().out
    if when == "before the first epoch":
        assert f"interrupted: no model was saved, and {run} is as it was" in out
        assert not run.exists()
    else:
        assert f"interrupted: the best model so far is intact in {run / 'model'}" in out
        assert Tagger.load(run / "model").predict(TEXTS)
    assert out.count("interrupted") == 1
    assert not list(tmp_path.glob(".run.bistack-staging-*"))


def test_a_full_disk_at_the_checkpoint_is_one_line_and_leaves_a_whole_model(
    trained, tmp_path, monkeypatch, capsys
):
    """safetensors says a full disk in its own error class: the run stops with one line naming
    the checkpoint, and the output holds a whole model that loads (the run's first best, which
    replaced the old one as it does once it has one), no half-written checkpoint."""
    from safetensors import SafetensorError

    from bistack.cli import main
    from bistack.runs import checkpoint

    run = copy_of(trained, tmp_path)

    def full(*args: object, **kwargs: object) -> None:
        raise SafetensorError("No space left on device (os error 28)")

    monkeypatch.setattr(checkpoint, "save_file", full)
    argv = ["train", str(trained["config"]), "--output", str(run), "--overwrite", "--no-progress"]
    assert main([*argv, "--set", "train.checkpoint_every=1"]) == 2
    error = capsys.readouterr().err
    assert "cannot write the checkpoint (No space left on device" in error
    assert "Traceback" not in error
    assert predictions(run / "model")  # a whole model
    assert not list(run.glob(".checkpoint*")) and not list(run.glob("*.bistack-tmp*"))
