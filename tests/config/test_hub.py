"""HuggingFace hub ids where a folder goes, resolved through the hub's cache: a model opens by
its id (and a pinned revision) offline, a backbone by id trains, and an id that is not cached is
one error naming it, where it looked and how to fetch it. The cache is laid out here as
``huggingface_hub`` lays it out (no network: ``HF_HUB_OFFLINE=1``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip(
    "huggingface_hub", reason="hub ids need huggingface_hub (bistack[transformers])"
)

MAIN, PINNED = "a" * 40, "b" * 40  # two commits of one repository


def cache_repo(home: Path, repo: str, commits: dict[str, Path], refs: dict[str, str]) -> Path:
    """``repo`` in the hub cache under ``home``: each commit's snapshot a copy of a folder, and
    refs (``main``...) naming commits."""
    folder = home / "hub" / f"models--{repo.replace('/', '--')}"
    for commit, source in commits.items():
        shutil.copytree(source, folder / "snapshots" / commit)
    (folder / "refs").mkdir(parents=True)
    for name, commit in refs.items():
        (folder / "refs" / name).write_text(commit)
    return folder


def bistack(args: list[str], home: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    return subprocess.run(
        [sys.executable, "-m", "bistack", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_a_model_opens_by_its_hub_id_and_a_pinned_revision(
    small_tagger, small_classifier, tmp_path
):
    home = tmp_path / "hf"
    cache_repo(home, "acme/ner", {MAIN: small_tagger, PINNED: small_classifier}, {"main": MAIN})
    tagged = bistack(
        ["predict", "acme/ner", "John lives in Paris .", "--format", "jsonl"], home, tmp_path
    )
    assert tagged.returncode == 0, tagged.stderr
    assert "entities" in json.loads(tagged.stdout)
    pinned = bistack(["predict", f"acme/ner@{PINNED}", "a fine film"], home, tmp_path)
    assert pinned.returncode == 0, pinned.stderr
    assert "label" in json.loads(pinned.stdout)  # the pinned commit holds the classifier
    script = "from bistack.api import Tagger; print(len(Tagger.load('acme/ner').labels))"
    env = os.environ | {"HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    loaded = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert loaded.returncode == 0 and int(loaded.stdout) > 1, loaded.stderr


def test_an_id_not_in_the_cache_and_a_snapshot_missing_a_file_are_clear_errors(
    small_tagger, tmp_path
):
    home = tmp_path / "hf"
    damaged = tmp_path / "damaged"
    shutil.copytree(small_tagger, damaged)
    (damaged / "model.safetensors").unlink()
    cache_repo(home, "acme/broken", {MAIN: damaged}, {"main": MAIN})
    missing = bistack(["predict", "acme/missing", "John ."], home, tmp_path)
    assert missing.returncode == 2
    said = missing.stderr
    assert "acme/missing: read as a HuggingFace hub id" in said
    assert "the model is not in the HuggingFace cache" in said
    assert str(home / "hub") in said and "hf download acme/missing" in said
    assert "Traceback" not in said
    unpinned = bistack(["predict", "acme/missing@v2", "John ."], home, tmp_path)
    assert "hf download acme/missing --revision v2" in unpinned.stderr
    broken = bistack(["predict", "acme/broken", "John ."], home, tmp_path)
    assert broken.returncode == 2 and "missing model.safetensors" in broken.stderr


def test_a_backbone_named_by_its_hub_id_trains_and_the_model_reopens(tmp_path):
    from tests.fixtures.written_models.make_fixtures import tiny_transformer
    from tests.text_models.test_end_to_end import sentiment_rows, write_tsv

    home = tmp_path / "hf"
    cache_repo(home, "acme/tiny-bert", {MAIN: tiny_transformer(tmp_path / "tiny")}, {"main": MAIN})
    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(32, 0))
    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(12, 1))
    config = {
        "kind": "layer_classifier",
        "data": {"train": "train.tsv", "dev": "dev.tsv", "text_column": "sentence",
                 "label_columns": ["label"]},
        "backbone": {"path": "acme/tiny-bert", "max_length": 16, "cache_dir": "cache"},
        "layer_pooling": {"type": "lstm", "lstm_hidden": 8},
        "train": {"max_epochs": 1},
    }  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    assert train.is_file() and dev.is_file()
    trained = bistack(["train", "config.yaml", "--output", "run", "--no-progress"], home, tmp_path)
    assert trained.returncode == 0, trained.stderr
    written = json.loads((tmp_path / "run" / "model" / "config.json").read_text())
    assert written["config"]["backbone"]["path"] == "acme/tiny-bert"  # as the user wrote it
    card = (tmp_path / "run" / "model" / "README.md").read_text()
    for said in (trained.stdout, card):  # named by its id, not by its snapshot's long path
        assert "backbone acme/tiny-bert (" in said and "snapshots" not in said
    predicted = bistack(["predict", "run/model", "a fine film"], home, tmp_path)
    assert predicted.returncode == 0 and "label" in json.loads(predicted.stdout), predicted.stderr


def test_a_mistyped_local_folder_is_named_missing_never_asked_of_the_hub(
    small_classifier, tmp_path, monkeypatch
):
    """``runs/mdoel`` (a typo under ``runs/``, which exists) is a local path even where the
    network is on and a hub cache holds a repository of that name; only what can be nothing but
    an id goes to the hub, and the message says it took it for one."""
    import huggingface_hub

    from bistack.errors import ModelFileError
    from bistack.predictor import open_model

    asked = []

    def hub(repo, **kwargs):
        asked.append(repo)
        raise OSError("no network in this test")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for typo in ("runs/mdoel", "./runs/mdoel", "runs/deep/mdoel"):
        with pytest.raises(ModelFileError, match=r"no such model directory \(runs/ holds no"):
            open_model(typo)
    assert asked == []
    with pytest.raises(ModelFileError, match="acme/model: read as a HuggingFace hub id"):
        open_model("acme/model")
    assert asked == ["acme/model"]
    # A hub cache holding a repository named like the typo: still the local path, from the CLI.
    home = tmp_path / "hf"
    cache_repo(home, "runs/mdoel", {MAIN: small_classifier}, {"main": MAIN})
    typed = bistack(["predict", "runs/mdoel", "a fine film"], home, tmp_path)
    assert typed.returncode == 2
    assert "runs/mdoel: no such model directory (runs/ holds no mdoel)" in typed.stderr


def test_the_config_help_says_a_backbone_may_be_a_hub_id(capsys):
    from bistack.cli import main

    assert main(["config", "layer_classifier"]) == 0
    assert "hub id (org/name[@revision])" in capsys.readouterr().out
