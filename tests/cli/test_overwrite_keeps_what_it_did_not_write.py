"""No command deletes a file it did not write, at any depth, nor its old result before the new
one exists. Every command that takes ``--overwrite`` (found from the parser, so a new one
cannot be missed) goes through the same cases: a file of the user's deep in its earlier output,
a symbolic link there, an ``--output`` that is a link to a folder, and a failure before the new
output exists."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import bistack
from bistack import tasks
from bistack.cli import build_parser, main
from tests.conftest import tiny_config, tiny_sentences, train_quietly, write_conll
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv


@dataclass
class Case:
    """A command's argv (its output given) and the output it writes: a folder, or a file."""

    argv: Callable[[Path], list[str]]
    folder: bool = True


def commands_with_overwrite() -> set[str]:
    parser = build_parser()
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if any("--overwrite" in a.option_strings for a in sub._actions):
                    found.add(name)
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """What the commands read: a tagger's config, data and model; a classifier with attention;
    two finished CVs of one table (to blend)."""
    root = tmp_path_factory.mktemp("overwrite-cases")
    train = write_conll(root / "train.txt", tiny_sentences(40, seed=0))
    dev = write_conll(root / "dev.txt", tiny_sentences(10, seed=1))
    config = tiny_config(train, dev, train={"max_epochs": 1})
    (root / "tagger.yaml").write_text(yaml.safe_dump(config))
    rows = write_tsv(root / "rows.tsv", sentiment_rows(40, 0))
    classifier = text_config(
        rows, rows, pooling={"type": "additive"}, train={"max_epochs": 1, "patience": 1}
    )
    model = train_quietly(tasks.config_from_dict(classifier), root / "classifier")
    cvs = []
    for pooling in ("mean", "additive"):
        cv = text_config(rows, None, pooling={"type": pooling}, train={"max_epochs": 1})
        cv["data"]["dev"] = None
        bistack.cross_validate(cv, root / f"cv-{pooling}", folds=2, say=lambda _: None)
        cvs.append(root / f"cv-{pooling}")
    (root / "texts.jsonl").write_text('{"text": "Anna left Paris ."}\n{"text": "John left ."}\n')
    return {
        "root": root,
        "config": root / "tagger.yaml",
        "dev": dev,
        "tagger": train_quietly(tasks.config_from_dict(config), root / "tagger"),
        "classifier": model,
        "cv0": cvs[0],
        "cv1": cvs[1],
        "texts": root / "texts.jsonl",
    }


CASES: dict[str, Callable[[dict[str, Path]], Case]] = {
    "train": lambda w: Case(lambda out: ["train", str(w["config"]), "--output", str(out)]),
    "cv": lambda w: Case(
        lambda out: [
            "cv",
            str(w["config"]),
            "--folds",
            "2",
            "--set",
            "data.dev=null",
            "--output",
            str(out),
        ]
    ),
    "blend": lambda w: Case(
        lambda out: ["blend", str(w["cv0"]), str(w["cv1"]), "--output", str(out)]
    ),
    "export": lambda w: Case(lambda out: ["export", str(w["tagger"]), "--output", str(out)]),
    "explain": lambda w: Case(
        lambda out: ["explain", str(w["classifier"]), "a fine film", "--output", str(out)]
    ),
    "evaluate": lambda w: Case(
        lambda out: ["evaluate", str(w["tagger"]), str(w["dev"]), "--report", str(out)]
    ),
    "predict": lambda w: Case(
        lambda out: [
            "predict",
            str(w["tagger"]),
            "--input",
            str(w["texts"]),
            "--output",
            str(out),
            "--format",
            "jsonl",
        ],
        folder=False,
    ),
}


def test_every_command_that_overwrites_has_its_cases():
    assert commands_with_overwrite() == set(CASES)


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root``: a file's bytes, a link's target (never followed)."""
    found: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = ("link", os.readlink(path))
            elif path.is_file():
                found[key] = path.read_bytes()
    return found


def deepest_folder(root: Path) -> Path:
    folders = [Path(d) for d, _, _ in os.walk(root)]
    return max(folders, key=lambda p: len(p.relative_to(root).parts))


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(CASES))
def test_overwrite_never_deletes_what_it_did_not_write(command, world, tmp_path, capsys):
    case = CASES[command](world)
    out = tmp_path / "out"
    assert main(case.argv(out)) == 0, capsys.readouterr().err
    if not case.folder:
        return file_cases(case, out, tmp_path, capsys)
    place = deepest_folder(out)
    # A file of the user's, deep inside the earlier output.
    (place / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    assert main([*case.argv(out), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "did not write" in err and "notes.txt" in err and "Traceback" not in err
    assert snapshot(tmp_path) == before
    (place / "notes.txt").unlink()
    # A symbolic link there, to a folder of the user's: never followed, never replaced.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "precious.txt").write_text("keep")
    (place / "linked").symlink_to(mine)
    before = snapshot(tmp_path)
    assert main([*case.argv(out), "--overwrite"]) == 2
    assert "linked" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
    (place / "linked").unlink()
    # An --output that is a link to the earlier output: written in the target, the link kept.
    real = tmp_path / "real"
    out.rename(real)
    out.symlink_to(real)
    assert main([*case.argv(out), "--overwrite"]) == 0, capsys.readouterr().err
    assert out.is_symlink() and Path(os.readlink(out)) == real
    assert (mine / "precious.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".real")) in (
        [],
        [".real.bistack-lock"],  # a run's lock, left empty for the next run
    )


def test_a_dangling_link_as_output_is_refused_by_name(world, tmp_path, capsys):
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "gone")
    assert main(CASES["blend"](world).argv(out)) == 2
    assert "which does not exist" in capsys.readouterr().err
    assert not (tmp_path / "gone").exists()


def file_cases(case: Case, out: Path, tmp_path: Path, capsys) -> None:
    """A file output: a run that fails on its first record leaves the old one byte for byte;
    an ``--output`` that is a link to a file is written in the target, the link kept."""
    old = out.read_bytes()
    before = snapshot(tmp_path)
    assert main([*case.argv(out), "--overwrite", "--text-field", "body"]) == 2
    assert "no field 'body'" in capsys.readouterr().err
    assert snapshot(tmp_path) == before and out.read_bytes() == old
    real = tmp_path / "real.jsonl"
    out.rename(real)
    real.write_bytes(b"an older output\n")
    out.symlink_to(real)
    assert main([*case.argv(out), "--overwrite"]) == 0, capsys.readouterr().err
    assert out.is_symlink() and real.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "real.jsonl"]


# Names a user writes that look like a run's leftovers (two dots, hidden) or its charts.
USERS_NAMES = (".notes.md", ".env.local", ".backup.d/a.txt", "mine.png")


def every_depth(out: Path) -> list[Path]:
    """The folders of ``out`` from the top down to its deepest, and every report folder."""
    deepest = deepest_folder(out)
    chain = [out, *[out / Path(*deepest.relative_to(out).parts[:n]) for n in range(1, 99)]]
    reports = [Path(d) for d, _, _ in os.walk(out) if Path(d).name.endswith("report")]
    return sorted({p for p in chain if p.is_dir() and out in (p, *p.parents)} | set(reports))


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(CASES))
def test_hidden_names_with_two_dots_survive_overwrite_at_every_depth(
    command, world, tmp_path, capsys
):
    case = CASES[command](world)
    if not case.folder:
        pytest.skip("predict writes a file: no depth to plant in")
    out = tmp_path / "out"
    assert main(case.argv(out)) == 0, capsys.readouterr().err
    for folder in every_depth(out):
        for name in USERS_NAMES:
            planted = folder / name
            planted.parent.mkdir(exist_ok=True)
            planted.write_text("mine")
            before = snapshot(tmp_path)
            code = main([*case.argv(out), "--overwrite"])
            err = capsys.readouterr().err
            where = planted.relative_to(out)
            assert planted.read_text() == "mine", f"{command} deleted {where}"
            if code == 2:
                assert Path(name).parts[0] in err and "Traceback" not in err, (where, err)
                assert snapshot(tmp_path) == before, where
            else:  # the run went ahead: only where a user's file is left beside it
                assert code == 0 and folder == out, (where, err)
            planted.unlink()
            if planted.parent != folder:
                planted.parent.rmdir()
