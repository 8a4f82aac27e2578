"""A finished cross-validation is never lost: a command that fails leaves it byte for byte, a
killed ``--overwrite`` leaves it whole (and the same command goes on), and a file of the user's
at any depth of its folder survives every command, or the command is refused naming it."""

import shutil
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from tests.cv.test_cross_validation import write_config, write_rows

ROWS = 24


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def cv(config: Path, output: Path, *flags: str) -> int:
    return main(
        ["cv", str(config), "--output", str(output), "--no-progress", "--folds", "2", *flags]
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("cv-folder")
    config = write_config(root, write_rows(root / "train.tsv", ROWS))
    assert cv(config, root / "out", "--threads", "1") == 0
    return config, root / "out"


@pytest.fixture
def copy(finished, tmp_path):
    """The finished CV and its config copied into a folder of the test's own."""
    config, out = finished
    shutil.copy(Path(config).parent / "train.tsv", tmp_path / "train.tsv")
    data = yaml.safe_load(Path(config).read_text())
    data["data"]["train"] = str(tmp_path / "train.tsv")
    (tmp_path / "cv.yaml").write_text(yaml.safe_dump(data))
    shutil.copytree(out, tmp_path / "out")
    # The copy's settings name the copied data, as a CV run there would have written them.
    settings = (tmp_path / "out" / "cv-settings.json").read_text()
    (tmp_path / "out" / "cv-settings.json").write_text(
        settings.replace(str(Path(config).parent / "train.tsv"), str(tmp_path / "train.tsv"))
    )
    return tmp_path / "cv.yaml", tmp_path / "out"


def damaged_data(config: Path) -> tuple[Path, list[str]]:
    train = config.parent / "train.tsv"
    train.write_text(train.read_text() + "a row with no label\n")
    return config, []


def dev_in_config(config: Path) -> tuple[Path, list[str]]:
    return config, ["--set", f"data.dev={config.parent / 'train.tsv'}"]


def more_folds_than_rows(config: Path) -> tuple[Path, list[str]]:
    return config, ["--folds", str(ROWS + 1)]


@pytest.mark.parametrize("mistake", [damaged_data, dev_in_config, more_folds_than_rows])
def test_a_failing_overwrite_leaves_the_finished_cv_byte_for_byte(copy, capsys, mistake):
    config, out = copy
    before = snapshot(out)
    config, flags = mistake(config)
    assert cv(config, out, "--overwrite", *flags) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert snapshot(out) == before


def test_a_killed_overwrite_leaves_the_finished_cv_and_the_same_command_goes_on(
    copy, monkeypatch, capsys
):
    from bistack.cv import runners

    config, out = copy
    before = snapshot(out)
    trained = runners.train_fold
    calls = []

    def killed_at_the_second_fold(job, *args, **kwargs):
        calls.append(job.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return trained(job, *args, **kwargs)

    monkeypatch.setattr(runners, "train_fold", killed_at_the_second_fold)
    config_data = yaml.safe_load(config.read_text())
    config_data["optimizer"]["lr"] = 0.02  # another CV: only --overwrite may replace it
    config.write_text(yaml.safe_dump(config_data))
    assert cv(config, out, "--overwrite") == 130
    assert "interrupted: the same command goes on from the first unfinished fold" in (
        capsys.readouterr().out
    )
    assert snapshot(out) == before  # the old CV, whole
    monkeypatch.setattr(runners, "train_fold", trained)
    assert cv(config, out, "--overwrite") == 0  # goes on from the fold it was killed in
    assert calls == ["fold0", "fold1"]
    settings = (out / "cv-settings.json").read_text()
    assert '"lr": 0.02' in settings
    assert not list(out.parent.glob(".out.cv-*"))


PLACES = [
    "notes.txt",
    "folds/notes.txt",
    "folds/fold0/notes.txt",
    "folds/fold0/model/notes.txt",
    "model/notes.txt",
    "model/members/fold0/notes.txt",
    "cv_report/notes.txt",
]


@pytest.mark.parametrize("place", PLACES)
def test_a_users_file_at_any_depth_survives_every_command(copy, capsys, place):
    config, out = copy
    mine = out / place
    mine.write_text("mine")
    # A plain rerun of the finished CV: the file kept, or the command refused naming it.
    code = cv(config, out)
    said = capsys.readouterr().err
    assert mine.read_text() == "mine"
    if code:
        assert code == 2 and place in said and "bistack did not write" in said
    else:
        assert place in ("notes.txt", "folds/fold0/notes.txt")  # beside what a CV replaces
    # --overwrite replaces the whole folder: refused, naming the file.
    before = snapshot(out)
    assert cv(config, out, "--overwrite") == 2
    said = capsys.readouterr().err
    assert place in said or "notes.txt" in said
    assert snapshot(out) == before


def test_a_second_cv_into_an_output_in_use_is_refused_naming_the_first(copy, capsys):
    from bistack.runs.rundir import output_lock

    config, out = copy
    before = snapshot(out)
    with output_lock(out, "cross-validation"):  # as a first CV holds it while it runs
        assert cv(config, out, "--overwrite") == 2
    said = capsys.readouterr().err
    assert f"{out} is in use by another cross-validation (pid " in said
    assert snapshot(out) == before
    assert cv(config, out) == 0  # free again once the first has finished


def test_a_full_disk_while_writing_the_oof_files_leaves_the_cv_as_it_was(copy, capsys, monkeypatch):
    import errno

    from bistack.text_models import folds

    config, out = copy
    before = snapshot(out)
    written = folds.atomic_write

    def full_disk(path, write):
        def half_then_full(temporary):
            Path(temporary).write_text("half a file")
            raise OSError(errno.ENOSPC, "No space left on device", str(temporary))

        return written(path, half_then_full if path.name == "oof.csv" else write)

    monkeypatch.setattr(folds, "atomic_write", full_disk)
    assert cv(config, out) == 2  # a rerun of the finished CV: it pools and writes again
    said = capsys.readouterr().err
    assert "No space left on device" in said and "Traceback" not in said
    after = snapshot(out)
    log = after.pop("cv.log", b"")  # the attempt's own words, after the earlier ones
    assert log.startswith(before.pop("cv.log", b""))
    assert after == before  # the old oof.csv whole, and no temporary file left


def test_a_cv_keeps_its_own_words_in_cv_log(copy, capsys):
    """The header, the scores and the calibration verdict go to ``cv.log`` as to the terminal;
    a rerun's lines follow the first's."""
    config, out = copy
    assert cv(config, out) == 0
    said = capsys.readouterr().out
    log = (out / "cv.log").read_text()
    assert said.strip() and all(line in log for line in said.strip().splitlines())
