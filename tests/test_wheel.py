"""What an installed bistack offers without a checkout: the wheel built from this tree, installed
alone (no source folder, no configs folder), lists and prints the recipes it ships and trains one
on a CoNLL cut given with --set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_sentences, write_conll

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The wheel installed into a folder of its own, and the environment that runs it first."""
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools")
    where = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(where / "dist"), str(ROOT)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    [wheel] = (where / "dist").glob("bistack-*.whl")
    site = where / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
         str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    return where, env


def bistack(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bistack", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_installed_package_lists_prints_and_trains_its_recipes(installed):
    where, env = installed
    work = where / "work"  # no checkout here, nor above
    work.mkdir()
    found = subprocess.run(
        [sys.executable, "-c", "import bistack; print(bistack.__file__)"],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert found.stdout.startswith(str(where / "site")), found.stdout
    listed = bistack(["recipes"], work, env)
    assert listed.returncode == 0 and "conll03-bilstm-crf" in listed.stdout, listed.stderr
    printed = bistack(["config", "--recipe", "conll03-bilstm-crf"], work, env)
    assert printed.returncode == 0 and "kind: tagger" in printed.stdout, printed.stderr
    missing = bistack(["train", "recipe:conll03-bilstm-crf"], work, env)
    assert missing.returncode == 2 and "data.train" in missing.stderr, missing.stderr
    write_conll(work / "train.txt", tiny_sentences(30, seed=0))
    write_conll(work / "dev.txt", tiny_sentences(10, seed=1))
    trained = bistack(
        ["train", "recipe:conll03-bilstm-crf", "--set", "data.train=train.txt",
         "--set", "data.dev=dev.txt", "--set", "train.max_epochs=1", "--no-progress"],
        work, env,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert (work / "runs" / "conll03-bilstm-crf" / "model" / "config.json").is_file()
