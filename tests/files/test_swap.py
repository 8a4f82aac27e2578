"""A folder is replaced whole or not at all: a kill at the exact rename never leaves the user's
path empty for good, and what a killed command staged is told by its marker and cleared."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bistack.errors import ConfigError
from bistack.files.claim import claim_folder
from bistack.files.swap import STAGING_MARKER, atomic_folder, parked, restore_parked

# Replaces ``out`` through atomic_folder with the two-rename fallback forced (a file system
# without an exchange), killing itself right after the first rename: the old folder parked.
KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from pathlib import Path
import bistack.files.swap as swap

renamed = []
real_rename = os.rename

def rename(source, target):
    real_rename(source, target)
    renamed.append(target)
    if len(renamed) == 1:
        os.kill(os.getpid(), signal.SIGKILL)

swap.exchange = swap.renames
swap.os.rename = rename
with swap.atomic_folder(Path(sys.argv[1])) as staging:
    (staging / "blend.json").write_text("new")
"""


def old_output(folder: Path) -> dict[str, bytes]:
    (folder / "model").mkdir(parents=True)
    (folder / "blend.json").write_text("old")
    (folder / "model" / "ensemble.json").write_text("{}")
    return read(folder)


def read(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_kill_between_the_fallbacks_renames_is_undone_by_the_next_command(tmp_path):
    out = tmp_path / "blend"
    before = old_output(out)
    done = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)])
    assert done.returncode == -signal.SIGKILL
    assert not out.exists() and parked(out).is_dir()  # the window the fallback leaves
    replacing = claim_folder(
        out, "--output", overwrite=True, signature="blend.json", layout=lambda name: True
    )
    assert replacing
    assert read(out) == before  # restored byte for byte, the marker gone
    assert not parked(out).exists()


def test_a_parked_folder_beside_an_output_is_named_and_kept(tmp_path):
    out = tmp_path / "blend"
    old_output(out)
    hidden = parked(out)
    hidden.mkdir()
    (hidden / "blend.json").write_text("older")
    said = restore_parked(out)
    assert said is not None and "is kept" in said
    assert (hidden / "blend.json").read_text() == "older"


def test_a_kill_at_the_exchange_leaves_one_whole_folder_and_marked_leftovers(tmp_path):
    """Whatever instant a kill comes, the user's path holds the old or the new folder, and
    every hidden folder left beside it carries the marker the next run clears it by."""
    out = tmp_path / "report"
    old_output(out)
    script = (
        "import sys; from pathlib import Path; from bistack.files.swap import atomic_folder\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    with atomic_folder(Path(sys.argv[1])) as staging:\n"
        "        (staging / 'blend.json').write_text('new')\n"
    )
    for delay in (0.05, 0.1, 0.2, 0.3):
        process = subprocess.Popen(
            [sys.executable, "-c", script, str(out)], stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        try:
            process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            process.kill()
        process.wait()
        assert (out / "blend.json").read_text() in ("old", "new")
        for sibling in tmp_path.glob(".report.*"):  # marked, or empty: what the next clears
            assert (sibling / STAGING_MARKER).is_file() or not any(sibling.iterdir()), sibling
    with atomic_folder(out) as staging:
        (staging / "blend.json").write_text("last")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    assert read(out) == {"blend.json": b"last"}


def test_a_hidden_folder_without_the_marker_is_never_cleared(tmp_path):
    out = tmp_path / "report"
    old_output(out)
    users = tmp_path / ".report.bistack-staging-mine"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    live = tmp_path / ".report.bistack-staging-live"
    live.mkdir()
    (live / STAGING_MARKER).write_text(str(os.getppid()))  # a process that runs
    with atomic_folder(out) as staging:
        (staging / "blend.json").write_text("new")
    assert (users / "notes.txt").read_text() == "mine" and live.is_dir()


def test_a_failure_inside_the_block_leaves_the_old_folder_as_it_was(tmp_path):
    out = tmp_path / "report"
    before = old_output(out)
    with pytest.raises(ConfigError), atomic_folder(out) as staging:
        (staging / "blend.json").write_text("half")
        raise ConfigError("the data was wrong")
    assert read(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
