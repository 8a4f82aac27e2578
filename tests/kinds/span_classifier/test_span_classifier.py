"""The extension proof: a kind whose input is neither a plain text nor tokens (a text with a
marked span), defined in this folder alone and registered with one call, trains, scores,
predicts on the command line, serves over HTTP and predicts a corpus, with no edit to bistack;
its own predict option (``top_labels``, declared on its card) reaches the command line's flags,
the server's request fields and the Ray Data step, checked alike in each.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from tests.kinds import span_classifier

NAMES = ["John", "Mary", "Paul", "Anna"]
PLACES = ["Paris", "London", "Berlin", "Rome"]


@pytest.fixture
def registered():
    card = span_classifier.register()
    yield card
    span_classifier.unregister()


def write_spans(path: Path, count: int, seed: int) -> Path:
    """ "NAME visited PLACE ." with the name (PER) or the place (LOC) as the span."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        name, place = rng.choice(NAMES), rng.choice(PLACES)
        text = f"{name} visited {place} ."
        label = rng.choice(["PER", "LOC"])
        word = name if label == "PER" else place
        start = text.index(word)
        record = {"text": text, "start": start, "end": start + len(word), "label": label}
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def trained(registered, tmp_path):
    train = write_spans(tmp_path / "train.jsonl", 80, 0)
    dev = write_spans(tmp_path / "dev.jsonl", 20, 1)
    config = tmp_path / "spans.yaml"
    config.write_text(
        yaml.safe_dump({"kind": "span_classifier", "data": {"train": str(train), "dev": str(dev)}})
    )
    run = tmp_path / "run"
    assert main(["train", str(config), "--output", str(run), "--no-progress"]) == 0
    return run / "model", dev


def test_it_trains_scores_and_predicts_from_the_command_line(trained, capsys):
    model, dev = trained
    capsys.readouterr()
    assert main(["evaluate", str(model), str(dev), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == 100.0
    assert main(["predict", str(model), "I met [Anna] in Rome .", "We flew to [Berlin] ."]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in records] == ["PER", "LOC"]
    assert records[0]["span"] == {"start": 6, "end": 10} and records[0]["text"].startswith("I met")
    # Its own input's errors, and what its card does not offer, are refused by the table.
    assert main(["predict", str(model), "no span marked here"]) == 2
    assert "a text with its span in [brackets]" in capsys.readouterr().err
    assert main(["predict", str(model), "[Rome]", "--format", "conll"]) == 2
    assert "--format conll is not for a span classifier" in capsys.readouterr().err


def test_its_own_output_format_reaches_predict_and_a_corpus(
    trained, tmp_path, capsys, small_tagger
):
    """A format declared on its card alone (``brackets``) is a --format choice with its help,
    writes arguments and --input records, and is refused for a kind that does not write it."""
    model, _ = trained
    capsys.readouterr()
    assert main(["predict", str(model), "I met [Anna] .", "--format", "brackets"]) == 0
    assert capsys.readouterr().out == "I met [Anna] .\tPER\n"
    lines = tmp_path / "spans.txt"
    lines.write_text("We flew to [Berlin] .\nI met [Anna] .\n")
    assert main(["predict", str(model), "--input", str(lines), "--format", "brackets"]) == 0
    assert capsys.readouterr().out == "We flew to [Berlin] .\tLOC\nI met [Anna] .\tPER\n"
    help = " ".join(_help(capsys).split())
    assert "brackets (the text with its span in [brackets], then its label)" in help
    assert main(["predict", str(small_tagger), "John lives here", "--format", "brackets"]) == 2
    assert "--format brackets is not for a recurrent sequence tagger" in capsys.readouterr().err


def test_a_format_is_declared_once_for_every_kind(registered):
    """Two kinds may write a format of one name only as the same declaration."""
    import dataclasses

    from bistack.cards import OutputFormat
    from bistack.tasks import register
    from tests.kinds.span_classifier.kind import CARD

    other = OutputFormat("conll", "something else", lambda prediction, extra: "")
    with pytest.raises(ValueError, match="format 'conll' is declared otherwise"):
        register(dataclasses.replace(CARD, kind="span_classifier_2", formats=(other,)))


def test_a_corpus_of_span_objects_and_marked_lines_is_predicted(trained, tmp_path, capsys):
    model, _ = trained
    objects = tmp_path / "in.jsonl"
    inputs = [
        {"text": "Paul left Paris .", "start": 0, "end": 4},
        {"text": "Paul left Paris .", "start": 10, "end": 15},
    ]
    objects.write_text(
        "".join(json.dumps({"input": i, "id": n}) + "\n" for n, i in enumerate(inputs))
    )
    out = tmp_path / "out.jsonl"
    argv = ["predict", str(model), "--input", str(objects), "--text-field", "input"]
    assert main([*argv, "--output", str(out)]) == 0
    assert [json.loads(line)["label"] for line in out.read_text().splitlines()] == ["PER", "LOC"]
    lines = tmp_path / "in.txt"
    lines.write_text("[Mary] visited Rome .\nnot marked\nMary visited [Rome] .\n")
    skipped = tmp_path / "skipped.jsonl"
    assert (
        main(
            [
                "predict",
                str(model),
                "--input",
                str(lines),
                "--on-error",
                "skip",
                "--skipped",
                str(skipped),
            ]
        )
        == 0
    )
    got = [json.loads(line)["label"] for line in capsys.readouterr().out.splitlines()]
    assert got == ["PER", "LOC"]
    [refused] = [json.loads(line) for line in skipped.read_text().splitlines()]
    assert refused["line"] == 2 and "a text with its span in [brackets]" in refused["error"]


def test_it_is_served(trained):
    pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    model, _ = trained
    with TestClient(create_app(load_served(model))) as client:
        info = client.get("/info").json()
        assert info["kind"] == "span_classifier" and info["inputs"] == ["span"]
        assert info["view"] == "classes" and info["labels"] == ["LOC", "PER"]
        response = client.post("/predict", json={"texts": ["I saw [John] ."]})
        assert response.status_code == 200
        assert response.json()["predictions"][0]["label"] == "PER"
        refused = client.post("/predict", json={"texts": ["nothing marked"]})
        assert refused.status_code == 422 and "brackets" in refused.json()["error"]


def test_its_own_option_reaches_the_command_line(trained, capsys, small_tagger):
    model, _ = trained
    capsys.readouterr()
    assert main(["predict", str(model), "I met [Anna] .", "--top-labels", "1"]) == 0
    [record] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["label"] == "PER" and list(record["probabilities"]) == ["PER"]
    assert main(["predict", str(model), "I met [Anna] ."]) == 0  # without it: every label
    assert len(json.loads(capsys.readouterr().out)["probabilities"]) == 2
    with pytest.raises(SystemExit):  # its declared range, as a usage error
        main(["predict", str(model), "I met [Anna] .", "--top-labels", "0"])
    assert "--top-labels: must be >= 1" in capsys.readouterr().err
    # Another kind does not take it, and says which options it has.
    assert main(["predict", str(small_tagger), "John lives here", "--top-labels", "1"]) == 2
    error = capsys.readouterr().err
    assert "--top-labels is not an option of a recurrent sequence tagger" in error
    assert "--min-confidence, --top-k" in error
    assert "--top-labels K" in _help(capsys)


def _help(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    return capsys.readouterr().out


def test_its_own_option_reaches_the_server(trained):
    pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    model, _ = trained
    with TestClient(create_app(load_served(model))) as client:
        assert client.get("/info").json()["options"] == ["top_labels"]
        body = {"texts": ["I saw [John] ."], "top_labels": 1}
        [record] = client.post("/predict", json=body).json()["predictions"]
        assert list(record["probabilities"]) == ["PER"]
        refused = client.post("/predict", json={"texts": ["I saw [John] ."], "top_labels": 0})
        assert refused.status_code == 422 and "top_labels" in refused.json()["error"]
        refused = client.post("/predict", json={"texts": ["I saw [John] ."], "top_k": 2})
        assert refused.status_code == 400
        assert "top_k is not an option of a span classifier" in refused.json()["error"]
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        assert "top_labels" in schema["PredictRequest"]["properties"]


def test_its_own_option_reaches_the_ray_step(trained):
    pd = pytest.importorskip("pandas", reason="the Ray Data step's batches here are pandas")
    from bistack.corpus.ray_data import Predictions
    from bistack.errors import ConfigError

    model, _ = trained
    step = Predictions(str(model), top_labels=1)
    batch = step(pd.DataFrame({"text": ["I saw [John] .", "to [Rome] ."]}))
    records = [json.loads(value) for value in batch["prediction"]]
    assert [list(r["probabilities"]) for r in records] == [["PER"], ["LOC"]]
    with pytest.raises(ConfigError, match="top_labels: >= 1, not 0"):
        Predictions(str(model), top_labels=0)
    with pytest.raises(ConfigError, match="top_k is not an option of a span classifier"):
        Predictions(str(model), top_k=2)
