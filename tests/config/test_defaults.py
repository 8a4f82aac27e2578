"""Defaults that are the recommended recipe and say what they are: the optimizer every shipped
config uses, named in the log; paths read from the config's folder; ``bistack config KIND``
printing every key with its default and comment, from the schema itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from bistack.tasks import TASKS, config_from_dict, load_config
from tests.conftest import tiny_sentences, write_conll


@pytest.mark.parametrize("kind", sorted(TASKS))
def test_bistack_config_prints_a_file_that_builds_into_the_defaults(kind, capsys):
    assert main(["config", kind]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    printed["data"]["train"] = "train.file"
    built = config_from_dict(printed)
    assert built == config_from_dict({"kind": kind, "data": {"train": "train.file"}})


def test_bistack_config_says_what_each_key_does(capsys):
    assert main(["config", "tagger"]) == 0
    out = capsys.readouterr().out
    assert "# The recurrent cell; mingru/minlstm" in out and "lstm, gru, mingru, minlstm" in out
    assert "\n  name: adam\n" in out and "# at most this many passes" in out


def test_the_default_optimizer_is_the_shipped_recipe_and_is_named(tmp_path, capsys):
    config = config_from_dict({"kind": "tagger", "data": {"train": "x"}})
    assert (config.optimizer.name, config.optimizer.lr) == ("adam", 0.002)
    train = write_conll(tmp_path / "train.txt", tiny_sentences(20, seed=0))
    path = tmp_path / "c.yaml"
    settings = {"kind": "tagger", "data": {"train": "train.txt"}, "train": {"max_epochs": 1}}
    path.write_text(yaml.safe_dump(settings))
    assert train.exists()
    assert main(["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    assert "optimizer adam, lr 0.002, decay 0.05 an epoch" in capsys.readouterr().out


def test_paths_in_a_config_are_read_from_its_folder(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "configs"
    folder.mkdir()
    (tmp_path / "data").mkdir()
    data = write_conll(tmp_path / "data" / "train.txt", tiny_sentences(5, 0))
    (folder / "a.yaml").write_text(yaml.safe_dump({"data": {"train": "../data/train.txt"}}))
    elsewhere = tmp_path / "somewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(folder / "a.yaml")
    assert config.data.train == str(data.resolve())
    # --set reads as the shell does: from the working directory.
    config = load_config(folder / "a.yaml", ["data.dev=dev.txt"])
    assert config.data.dev == "dev.txt"
    # A config of an earlier version, its path written from the working directory: still read,
    # with a warning saying how to write it.
    monkeypatch.chdir(tmp_path)
    (folder / "b.yaml").write_text(yaml.safe_dump({"data": {"train": "data/train.txt"}}))
    assert load_config(folder / "b.yaml").data.train == str(data.resolve())
    assert "write ../data/train.txt" in capsys.readouterr().err


def test_a_missing_data_file_is_named_by_its_absolute_path(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "nowhere/train.txt"}}))
    assert main(["train", str(path), "--output", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err
    assert str(tmp_path / "nowhere" / "train.txt") in error, error


def test_the_python_api_chooses_the_device_and_reads_paths_alike(tmp_path):
    import bistack

    write_conll(tmp_path / "train.txt", tiny_sentences(20, seed=0))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "train.txt"}, "train": {"max_epochs": 1}}))
    os.chdir(tmp_path.parent)  # anywhere but beside the config
    try:
        result = bistack.train(path, tmp_path / "run", accelerator="cpu", devices=1)
    finally:
        os.chdir(tmp_path)
    assert result.model_dir.is_dir()
    with pytest.raises(Exception, match="accelerator"):
        bistack.train(path, tmp_path / "run2", accelerator="tpu-that-is-not-here")


def test_a_number_typed_for_a_named_choice_is_the_choice(tmp_path):
    """``--set backbone.precision=32`` reads as YAML's integer 32; the choice it names is
    "32". A number that names no choice is still refused, naming the choices."""
    from bistack.errors import ConfigError
    from bistack.tasks import load_config

    recipe = Path(__file__).resolve().parents[2] / "configs" / "commonlit-mpnet-layers.yaml"
    table = tmp_path / "t.csv"
    table.write_text("excerpt,target\na,1\n")
    data = [f"data.train={table}", f"data.dev={table}"]
    config = load_config(recipe, ["backbone.precision=32", *data])
    assert config.backbone.precision == "32"
    with pytest.raises(ConfigError, match="must be one of 'auto', '32', 'bf16-mixed', got 16"):
        load_config(recipe, ["backbone.precision=16", *data])
