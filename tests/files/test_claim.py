"""The claim on an output folder walks every depth: a file of the user's anywhere a command
would replace, or a symbolic link there, is named and refused before anything changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bistack.errors import BistackError
from bistack.runs.rundir import check_output


def run_folder(root: Path) -> Path:
    """A finished training run of a fine-tuned model: its model, backbone and metrics."""
    model = root / "run" / "model"
    (model / "backbone").mkdir(parents=True)
    for name in ("config.json", "vocab.json", "model.safetensors"):
        (model / name).write_text("{}")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt"):
        (model / "backbone" / name).write_text("{}")
    (root / "run" / "metrics.csv").write_text("epoch\n")
    return root / "run"


def test_a_note_in_a_fine_tuned_backbones_folder_is_refused(tmp_path):
    run = run_folder(tmp_path)
    check_output(run, overwrite=True)  # bistack's files only: taken
    (run / "model" / "backbone" / "notes.txt").write_text("mine")
    with pytest.raises(BistackError, match=r"model/backbone/notes\.txt"):
        check_output(run, overwrite=True)


def test_a_link_anywhere_a_run_replaces_is_refused_and_never_followed(tmp_path):
    run = run_folder(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (run / "model" / "backbone" / "more").symlink_to(mine)
    with pytest.raises(BistackError, match=r"model/backbone/more"):
        check_output(run, overwrite=True)


def test_the_users_files_beside_a_runs_model_are_left_and_need_no_refusal(tmp_path):
    run = run_folder(tmp_path)
    (run / "notes.txt").write_text("mine")
    (run / "data").symlink_to(tmp_path)  # a link of the user's beside the model: untouched
    check_output(run, overwrite=True)


def test_what_a_killed_save_left_in_a_model_is_bistacks_own(tmp_path):
    run = run_folder(tmp_path)
    (run / "model" / ".model.safetensors.bistack-tmp-abcd1234").write_text("half")
    (run / "model" / ".backbone.bistack-staging-x1y2").mkdir()
    check_output(run, overwrite=True)


@pytest.mark.parametrize("name", [".notes.md", ".env.local", ".config.safetensors.tmp"])
def test_a_users_hidden_name_with_two_dots_is_never_taken_for_a_leftover(tmp_path, name):
    run = run_folder(tmp_path)
    (run / "model" / name).write_text("mine")
    with pytest.raises(BistackError, match=re.escape(name)):
        check_output(run, overwrite=True)


@pytest.mark.parametrize("name", ["train.log", "metrics.csv", "dev_metrics.json"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_runs_file_names_without_a_model_are_the_users(tmp_path, name, overwrite):
    """Only a run's model makes the files beside it a run's: a ``train.log`` in a folder with
    no model is the user's, and a run would write its own over it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("mine")
    with pytest.raises(BistackError, match=re.escape(f"did not write there ({name})")):
        check_output(out, overwrite=overwrite)
    assert (out / name).read_text() == "mine"
