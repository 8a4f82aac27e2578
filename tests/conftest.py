"""Shared fixtures: tiny CoNLL files written by the tests, and the path to ../shared/data."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

import bistack.config.machine
from bistack import tasks
from bistack.runs.driver import RunOptions
from bistack.training import train_config

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# This machine's answer, before the suite's fixtures settle ``auto`` at 32 (below).
NATIVE_BFLOAT16 = bistack.config.machine.native_bfloat16


@pytest.fixture(scope="session", autouse=True)
def float32_frozen_passes():
    """The suite's in-process fixtures compare models in float32 (an export within 1e-5 of its
    PyTorch model, cached vectors byte for byte), so ``backbone.precision: auto`` settles at 32
    in them; the tests of ``auto`` itself use this machine's answer (``NATIVE_BFLOAT16``), and
    the commands the suite runs in processes of their own settle it as a user's would."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bistack.config.machine, "native_bfloat16", lambda: False)
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow first, the README's commands (the longest, minutes) first of all:
    pytest-xdist's work stealing hands each worker a contiguous share and takes from a queue's
    tail, so a long test left near the end of the order would run alone while the other
    workers sit idle."""

    def order(item: pytest.Item) -> int:
        if item.get_closest_marker("slow") is None:
            return 2
        return 0 if item.path.name == "test_readme_commands.py" else 1

    items.sort(key=order)  # stable: the rest keep their order


def shared_file(*parts: str) -> Path:
    """A file under ../shared/data, or a skip saying it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the benchmark data lives in ../shared/data beside the repo")
    return path


NAMES = ["John", "Mary", "Paul", "Anna", "Peter", "Susan"]
PLACES = ["Paris", "London", "Berlin", "Rome", "New York", "Los Angeles"]
VERBS = ["visited", "left", "loves", "praised"]


def tiny_sentences(count: int, seed: int = 0) -> list[list[tuple[str, str]]]:
    """Sentences "NAME VERB PLACE yesterday ." with IOB1 tags."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        name, verb, place = rng.choice(NAMES), rng.choice(VERBS), rng.choice(PLACES)
        tokens = [(name, "I-PER"), (verb, "O")]
        tokens += [(word, "I-LOC") for word in place.split()]
        tokens += [("yesterday", "O"), (".", "O")]
        sentences.append(tokens)
    return sentences


def write_conll(path: Path, sentences: list[list[tuple[str, str]]], docstart: bool = True) -> Path:
    lines = ["-DOCSTART- -X- O O", ""] if docstart else []
    for sentence in sentences:
        lines += [f"{token} NNP I-NP {tag}" for token, tag in sentence]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tiny_conll(tmp_path: Path) -> tuple[Path, Path]:
    """(train, dev) CoNLL files in the four-column CoNLL-2003 format."""
    return (
        write_conll(tmp_path / "train.txt", tiny_sentences(120, seed=0)),
        write_conll(tmp_path / "dev.txt", tiny_sentences(30, seed=1)),
    )


def tiny_config(train_path: Path, dev_path: Path | None, **sections: dict) -> dict:
    """A small, fast tagging config as a dict (YAML-ready)."""
    config = {
        "kind": "tagger",
        "data": {"train": str(train_path), "dev": str(dev_path) if dev_path else None},
        "features": {"word_dim": 16, "char_dim": 8, "char_hidden": 8, "casing_dim": 4},
        "encoder": {"hidden_size": 16},
        "optimizer": {"name": "adam", "lr": 0.01},
        "train": {"batch_size": 8, "max_epochs": 2, "patience": 2, "eval_batch_size": 16},
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return config


def train_quietly(config, output: Path) -> Path:
    """Train through the task table without progress bars; the model directory."""
    return train_config(config, output, RunOptions(progress=False)).model_dir


@pytest.fixture(scope="session")
def small_tagger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small trained tagger's model directory, shared by the serving and corpus tests."""
    root = tmp_path_factory.mktemp("served-tagger")
    train = write_conll(root / "train.txt", tiny_sentences(120, seed=0))
    dev = write_conll(root / "dev.txt", tiny_sentences(30, seed=1))
    config = tasks.config_from_dict(tiny_config(train, dev, train={"max_epochs": 4}))
    return train_quietly(config, root / "run")


@pytest.fixture(scope="session")
def small_classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small trained classifier with attention pooling, shared by the serving and corpus
    tests."""
    from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

    root = tmp_path_factory.mktemp("served-classifier")
    train = write_tsv(root / "train.tsv", sentiment_rows(200, 0))
    dev = write_tsv(root / "dev.tsv", sentiment_rows(40, 1))
    config = text_config(train, dev, pooling={"type": "additive"}, train={"max_epochs": 3})
    return train_quietly(tasks.config_from_dict(config), root / "run")


@pytest.fixture(scope="session")
def small_regressor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small trained regressor (values are the count of positive words), for corpus tests."""
    from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

    root = tmp_path_factory.mktemp("small-regressor")
    rows = [(text, float(sum(w in text for w in ("great", "lovely")))) for text, _ in
            sentiment_rows(200, 0)]  # fmt: skip
    train = write_tsv(root / "train.tsv", rows, header=("sentence", "score"))
    dev = write_tsv(root / "dev.tsv", rows[:40], header=("sentence", "score"))
    config = text_config(train, dev, kind="regressor", train={"max_epochs": 2})
    config["data"]["label_columns"] = ["score"]
    return train_quietly(tasks.config_from_dict(config), root / "run")


def with_ctrl_c() -> None:
    """``preexec_fn`` for a subprocess a test interrupts with SIGINT: Ctrl-C as a terminal
    delivers it. A pytest-xdist worker ignores SIGINT, and an ignored signal stays ignored in
    its children (as a shell's background jobs ignore Ctrl-C), so the child gets the default
    back before it starts."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
