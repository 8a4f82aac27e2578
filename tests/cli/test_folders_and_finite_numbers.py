"""Nothing lost, round three: a folder a command writes is never one it may not empty, and no
setting or weight that is not a finite number gets into a model."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from bistack.runs.averaging import WeightAverage
from tests.conftest import tiny_config


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def evaluate(small_tagger: Path, data: Path, *options: str) -> int:
    return main(["evaluate", str(small_tagger), str(data), *options])


@pytest.fixture
def dev(tiny_conll) -> Path:
    return tiny_conll[1]


def test_a_report_never_empties_a_folder_of_other_files(small_tagger, dev, tmp_path, capsys):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep me")
    for extra in ([], ["--overwrite"]):
        assert evaluate(small_tagger, dev, "--report", str(folder), *extra) == 2
        err = capsys.readouterr().err
        assert "holds files bistack did not write there (mine.txt)" in err
    assert tree(folder) == {"mine.txt": b"keep me"}


def test_a_report_replaces_an_earlier_report_only_with_overwrite(
    small_tagger, dev, tmp_path, capsys
):
    folder = tmp_path / "report"
    assert evaluate(small_tagger, dev, "--report", str(folder)) == 0
    first = tree(folder)
    assert "report.json" in first
    assert evaluate(small_tagger, dev, "--report", str(folder)) == 2
    assert "give --overwrite to replace it" in capsys.readouterr().err
    assert tree(folder) == first
    assert evaluate(small_tagger, dev, "--report", str(folder), "--overwrite") == 0
    assert set(tree(folder)) == set(first)


@pytest.mark.parametrize("where", [".", "..", "/", "~"])
def test_a_report_never_takes_the_working_directory_a_parent_or_the_root(
    small_tagger, dev, tmp_path, capsys, monkeypatch, where
):
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.txt").write_text("keep me")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(work))
    before = tree(tmp_path)
    target = str(Path(where).expanduser())
    assert evaluate(small_tagger, dev, "--report", target, "--overwrite") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --report") and "Traceback" not in err
    assert tree(tmp_path) == before


def test_overwrite_without_a_report_is_refused(small_tagger, dev, capsys):
    assert evaluate(small_tagger, dev, "--overwrite") == 2
    assert "--overwrite replaces an earlier --report" in capsys.readouterr().err


def test_an_export_never_deletes_what_it_did_not_write(small_tagger, tmp_path, capsys):
    pytest.importorskip("onnx", reason="export needs bistack[onnx]")
    folder = tmp_path / "exported"
    assert main(["export", str(small_tagger), "--output", str(folder)]) == 0
    (folder / "mine.txt").write_text("keep me")
    assert main(["export", str(small_tagger), "--output", str(folder), "--overwrite"]) == 2
    assert "holds files bistack did not write there (mine.txt)" in capsys.readouterr().err
    assert (folder / "mine.txt").read_text() == "keep me"
    (folder / "mine.txt").unlink()
    assert main(["export", str(small_tagger), "--output", str(folder), "--overwrite"]) == 0


def write_config(tmp_path: Path, tiny_conll, **sections) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tiny_config(*tiny_conll, **sections)))
    return path


def test_training_into_a_folder_of_other_files_asks_for_overwrite(tiny_conll, tmp_path, capsys):
    config = write_config(tmp_path, tiny_conll, train={"max_epochs": 1})
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    argv = ["train", str(config), "--output", str(folder), "--no-progress"]
    assert main(argv) == 2
    assert "holds files of its own (notes.txt) and no model" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert (folder / "notes.txt").read_text() == "keep me"
    assert (folder / "model" / "config.json").is_file()


def test_training_never_takes_the_working_directory(tiny_conll, tmp_path, capsys, monkeypatch):
    config = write_config(tmp_path, tiny_conll, train={"max_epochs": 1})
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for where in (".", str(work.parent.parent)):
        assert main(["train", str(config), "--output", where, "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert "working directory" in err or "contains" in err
    assert os.listdir(work) == []


@pytest.mark.parametrize(
    "setting",
    [
        "train.weight_average=.nan",
        "train.weight_average=inf",
        "optimizer.lr=nan",
        "optimizer.momentum=-inf",
        "encoder.dropout=NaN",
        "train.max_minutes=nan",
    ],
)
def test_a_setting_that_is_not_a_finite_number_is_named(tiny_conll, tmp_path, capsys, setting):
    config = write_config(tmp_path, tiny_conll)
    argv = ["train", str(config), "--output", str(tmp_path / "run"), "--set", setting]
    assert main(argv) == 2
    key = setting.split("=")[0]
    assert f"{key} must be a finite number" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_weights_that_are_not_finite_never_replace_a_good_model(
    tiny_conll, tmp_path, capsys, monkeypatch
):
    """The loss stays finite while the weight average breaks: the run stops, naming the
    weights, and the model already in the output stays byte for byte."""
    config = write_config(tmp_path, tiny_conll, train={"max_epochs": 2, "weight_average": 0.5})
    output = tmp_path / "run"
    argv = ["train", str(config), "--output", str(output), "--no-progress"]
    assert main(argv) == 0
    before = tree(output / "model")
    update = WeightAverage.update

    def broken_update(self):
        update(self)
        for tensor in self.average.values():
            tensor.fill_(float("nan"))

    monkeypatch.setattr(WeightAverage, "update", broken_update)
    capsys.readouterr()
    assert main([*argv, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "training diverged by epoch 1: the weights" in err and "are not finite" in err
    assert tree(output / "model") == before


@pytest.mark.parametrize("value", [2, -1, float("nan"), "0.5"])
def test_the_python_api_refuses_a_min_confidence_that_is_no_probability(small_tagger, value):
    from bistack.api import Tagger

    tagger = Tagger.load(small_tagger)
    with pytest.raises(ValueError, match="min_confidence must be a probability in"):
        tagger.predict(["Mary visited Paris yesterday ."], min_confidence=value)
    with pytest.raises(ValueError, match="min_confidence must be a probability in"):
        tagger.predict_tokens([["Mary", "visited", "Paris"]], min_confidence=value)


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_the_python_api_refuses_a_batch_size_that_is_no_count(
    small_tagger, small_classifier, value
):
    from bistack.api import Classifier, Tagger

    with pytest.raises(ValueError, match="batch_size must be a whole number >= 1"):
        Tagger.load(small_tagger).predict(["Mary visited Paris ."], batch_size=value)
    with pytest.raises(ValueError, match="batch_size must be a whole number >= 1"):
        Classifier.load(small_classifier).predict(["a lovely film"], batch_size=value)


@pytest.mark.parametrize(
    "space, message",
    [
        ("optimizer.lr: {log: [1.0e-4, .inf]}", "a range's bounds must be finite"),
        ("encoder.dropout: [.nan, 0.5]", "a range's bounds must be finite"),
        ("train.batch_size: {range: [8, 16], step: 32}", "step 32 is longer than the range"),
        ("encoder.dropout: {range: [0.1, 0.5], step: .inf}", "step must be a number > 0"),
        ("encoder.dropout: [0.1, 0.5]\nencoder.dropout: [0.2, 0.3]", "is given twice"),
    ],
)
def test_a_search_space_that_cannot_be_searched_is_named_before_any_trial(
    tiny_conll, tmp_path, space, message
):
    from bistack.errors import ConfigError
    from bistack.studies.search_space import read_space
    from bistack.tasks import config_from_dict

    path = tmp_path / "space.yaml"
    path.write_text(space + "\n")
    config = config_from_dict(tiny_config(*tiny_conll))
    with pytest.raises(ConfigError, match=message) as caught:
        read_space(path, config)
    assert str(caught.value).startswith(str(path))


def test_a_temperature_fitted_outside_the_plausible_range_is_not_kept():
    """A classifier below chance on dev: the fit pushes the temperature towards infinity (every
    text the same probabilities), so the trained probabilities stay."""
    import numpy as np

    from bistack.data.tables import Example
    from bistack.text_models.outputs import ClassOutputs, RawOutputs

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 200)
    logits = np.stack([gold * 3.0, (1 - gold) * 3.0], axis=1)  # always the wrong label
    logits += rng.normal(0, 0.1, logits.shape)
    examples = [Example(f"text {i}", (str(g),), i + 2) for i, g in enumerate(gold)]
    outputs = ClassOutputs({"labels": ["0", "1"]})
    said = outputs.fit_on_dev(
        examples, "dev.tsv", RawOutputs([], logits.astype("f4"), None, 0), False
    )
    assert "above 20" in said and "kept as trained" in said
    assert "temperature" not in outputs.info


def damage(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("value", [float("nan"), 0, -1.5, "warm", float("inf")])
@pytest.mark.parametrize("where", ["classifier", "classifier export", "tagger", "tagger export"])
def test_a_damaged_temperature_is_named_when_the_model_opens(
    small_classifier, small_tagger, tmp_path, capsys, value, where
):
    kind, _, exported = where.partition(" ")
    source = {"classifier": small_classifier, "tagger": small_tagger}[kind]
    if exported:
        pytest.importorskip("onnx", reason="export needs bistack[onnx]")
        folder = tmp_path / "exported"
        assert main(["export", str(source), "--output", str(folder)]) == 0
        file = folder / "export.json"
    else:
        folder = tmp_path / "model"
        shutil.copytree(source, folder)
        file = folder / "config.json"
    if kind == "classifier":
        damage(file, lambda d: d["outputs"].__setitem__("temperature", value))
    elif exported:
        damage(file, lambda d: d["decoder"].__setitem__("temperature", value))
    else:
        damage(file, lambda d: d.__setitem__("calibration", {"temperature": value}))
    capsys.readouterr()
    assert main(["predict", str(folder), "John visited Paris ."]) == 2
    err = capsys.readouterr().err
    assert file.name in err and "temperature" in err, err
    assert "Traceback" not in err


def serve(model: Path, *options: str) -> tuple[subprocess.Popen, str]:
    """``bistack serve`` on a free port, once it says where it answers."""
    command = [sys.executable, "-m", "bistack", "serve", str(model), "--port", "0"]
    server = subprocess.Popen(
        [*command, "--threads", "1", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = server.stdout.readline()
    match = re.search(r"http://[\d.]+:\d+", line)
    assert match, (line, server.stderr.read() if server.poll() is not None else "")
    return server, match.group(0)


def test_a_killed_supervisor_takes_its_workers_with_it(small_tagger):
    from tests.serve.test_app import worker_processes

    server, url = serve(small_tagger, "--workers", "2")
    try:
        deadline = time.monotonic() + 60
        while len(workers := worker_processes(server.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        server.kill()  # kill -9: no handler runs
        server.wait()
        while alive := [p for p in workers if Path(f"/proc/{p}").exists()]:
            assert time.monotonic() < deadline, f"workers {alive} outlived their supervisor"
            time.sleep(0.1)
        host, port = url.removeprefix("http://").split(":")
        with pytest.raises(OSError):  # nobody holds the port
            socket.create_connection((host, int(port)), timeout=5).close()
    finally:
        server.kill()


def test_a_client_that_leaves_mid_request_is_no_server_error(small_tagger):
    httpx = pytest.importorskip("httpx")
    server, url = serve(small_tagger, "--workers", "1")
    try:
        deadline = time.monotonic() + 60
        while httpx.get(url + "/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        body = json.dumps({"texts": ["John visited Paris ."] * 50}).encode()
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as client:
            head = f"POST /predict HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            client.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:40])
            time.sleep(0.3)
        while "bistack_requests_total" not in (metrics := httpx.get(url + "/metrics").text) or (
            'route="unmatched"' not in metrics
        ):
            assert time.monotonic() < deadline, metrics
            time.sleep(0.1)
        statuses = re.findall(r'bistack_requests_total\{[^}]*status="(\d+)"', metrics)
        assert "499" in statuses and "500" not in statuses, statuses
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


@pytest.mark.parametrize(
    ("workers", "after"), [("1", 0.0), ("1", 0.2), ("1", 1.5), ("2", 0.0), ("2", 0.2)]
)
def test_sigterm_at_any_point_answers_what_queued(small_tagger, workers, after):
    """A server listens before it serves (one process: before uvicorn has started and warmed
    up; worker processes: before their model loads); a request that queued meanwhile is
    answered, not reset, and the server ends, whenever SIGTERM arrives: at once, while it
    warms up, or once it serves (``after`` seconds after the request)."""
    httpx = pytest.importorskip("httpx")
    server, url = serve(small_tagger, "--workers", workers)
    answers: list = []

    def send() -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            answers.append(client.post("/predict", json={"texts": ["Mary left Rome ."]}))

    thread = threading.Thread(target=send)
    thread.start()
    time.sleep(after)  # the request is on its way, or in the listening socket's queue
    server.send_signal(signal.SIGTERM)
    thread.join(60)
    _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    [answer] = answers
    assert answer.status_code == 200
    assert answer.json()["predictions"][0]["text"] == "Mary left Rome ."


@pytest.mark.parametrize("command", ["ladder", "compare-poolers", "tune"])
def test_the_studies_never_take_the_working_directory(
    tiny_conll, tmp_path, capsys, monkeypatch, command
):
    config = tiny_config(*tiny_conll)
    if command == "compare-poolers":
        table = tmp_path / "train.tsv"
        table.write_text("sentence\tlabel\na good film\t1\n")
        config = {"kind": "layer_classifier", "data": {"train": str(table), "dev": str(table),
                  "text_column": "sentence", "label_columns": ["label"]}}  # fmt: skip
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "space.yaml").write_text("optimizer.lr: [0.001, 0.01]\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("keep me")
    monkeypatch.chdir(work)
    argv = [command, str(tmp_path / "config.yaml")]
    argv += ["--space", str(tmp_path / "space.yaml"), "--trials", "2"] if command == "tune" else []
    assert main([*argv, "--output", "."]) == 2
    assert "--output . is the working directory" in capsys.readouterr().err
    assert os.listdir(work) == ["notes.txt"]


@pytest.mark.parametrize("name", ["line", "row"])
def test_an_id_field_named_as_the_records_place_is_refused(small_tagger, tmp_path, capsys, name):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"text": "John left .", name: "mine"}) + "\n")
    argv = ["predict", str(small_tagger), "--input", str(source), "--id-field", name]
    assert main([*argv, "--output", str(tmp_path / "out.jsonl")]) == 2
    assert f"each output record keeps its input's {name} under that name" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_a_nan_id_is_the_records_fault_not_the_models(small_tagger, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "John left .", "id": NaN}\n{"text": "Mary left .", "id": 2}\n')
    output, skipped = tmp_path / "out.jsonl", tmp_path / "skipped.jsonl"
    argv = ["predict", str(small_tagger), "--input", str(source), "--id-field", "id"]
    argv += ["--output", str(output), "--on-error", "skip", "--skipped", str(skipped)]
    argv += ["--format", "jsonl"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "weights" not in err
    [record] = [json.loads(line) for line in output.read_text().splitlines()]
    assert record["id"] == 2
    assert "its id field 'id' is nan, not a finite number or text" in skipped.read_text()


def test_weights_in_the_wrong_shape_are_said_as_what_they_are(small_tagger, tmp_path, capsys):
    model = Path(shutil.copytree(small_tagger, tmp_path / "model"))
    (model / "model.safetensors").unlink()
    (model / "model.safetensors").mkdir()
    assert main(["predict", str(model), "John left ."]) == 2
    assert "model.safetensors: not a file; expected the model's model.safetensors" in (
        capsys.readouterr().err
    )
    (model / "model.safetensors").rmdir()
    (model / "model.safetensors").symlink_to(tmp_path / "gone.safetensors")
    assert main(["predict", str(model), "John left ."]) == 2
    assert "gone.safetensors, which is not there" in capsys.readouterr().err


def test_info_names_a_card_that_is_not_utf8(small_tagger, tmp_path, capsys):
    model = Path(shutil.copytree(small_tagger, tmp_path / "model"))
    (model / "README.md").write_bytes(b"---\nkind: \xff\xfe\n---\n")
    assert main(["info", str(model)]) == 2
    err = capsys.readouterr().err
    assert "README.md: not UTF-8 text" in err and "Traceback" not in err


def test_an_export_whose_files_disagree_on_the_labels_is_named(small_classifier, tmp_path, capsys):
    pytest.importorskip("onnx", reason="export needs bistack[onnx]")
    folder = tmp_path / "exported"
    assert main(["export", str(small_classifier), "--output", str(folder)]) == 0
    damage(folder / "export.json", lambda d: d["outputs"]["labels"].append("extra"))
    data = tmp_path / "data.tsv"
    data.write_text("sentence\tlabel\na lovely film\t1\n")
    capsys.readouterr()
    assert main(["evaluate", str(folder), str(data)]) == 2
    err = capsys.readouterr().err
    assert "export.json names 3 labels: the files are of two different exports" in err


def test_tagging_a_token_that_is_no_string_is_a_clear_type_error(small_tagger):
    from bistack.api import Tagger

    with pytest.raises(TypeError, match="sentence 0, token 0 is NoneType, not a string"):
        Tagger.load(small_tagger).tag_tokens([[None]])


def test_the_report_leaves_out_seen_entities_when_the_training_file_changed(
    tiny_conll, tmp_path, capsys
):
    config = write_config(tmp_path, tiny_conll, train={"max_epochs": 1})
    assert main(["train", str(config), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    model, train = tmp_path / "run" / "model", tiny_conll[0]
    sections = []
    for edit in (False, True):
        if edit:  # the same path, other sentences
            train.write_text(train.read_text().replace("Paris", "Lyon"))
        report = tmp_path / f"report-{edit}"
        assert main(["evaluate", str(model), str(tiny_conll[1]), "--report", str(report)]) == 0
        sections.append(json.loads((report / "report.json").read_text())["sections"][0])
    assert "seen_unseen" in sections[0]
    assert "seen_unseen" not in sections[1]
    assert any("has changed since the model was trained on it" in n for n in sections[1]["notes"])
