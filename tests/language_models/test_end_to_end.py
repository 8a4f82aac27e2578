"""The causal LSTM language model, and the leakage a bidirectional one shows (first seed)."""

from __future__ import annotations

import csv
import json
import random

import pytest
import yaml

from bistack.causality import check_causal
from bistack.cli import main
from bistack.errors import ConfigError
from bistack.language_models.model import LanguageModel
from bistack.language_models.network import collate_lm
from bistack.tasks import config_from_dict
from tests.conftest import train_quietly

WORDS = [f"w{i}" for i in range(24)]


def corpus(path, lines=300, seed=0):
    """Lines of random words: nothing to predict beyond word frequencies (perplexity ~ 24)."""
    rng = random.Random(seed)
    text = "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 12))) for _ in range(lines))
    path.write_text(text + "\n", encoding="utf-8")
    return path


def lm_config(train, bidirectional=False, allow_leakage=False, epochs=8):
    return {
        "kind": "language_model",
        "data": {"train": str(train), "dev_fraction": 0.1, "max_length": 16},
        "features": {"word_dim": 16},
        "encoder": {"hidden_size": 32, "bidirectional": bidirectional, "outer_dropout": 0.0},
        "allow_leakage": allow_leakage,
        "optimizer": {"name": "adam", "lr": 0.01},
        "train": {"batch_size": 16, "max_epochs": epochs, "patience": epochs},
    }


def last_row(run):
    with (run / "metrics.csv").open() as handle:
        return list(csv.DictReader(handle))[-1]


def test_by_default_the_guard_refuses_a_bidirectional_language_model(tmp_path):
    with pytest.raises(ConfigError, match=r"encoder.bidirectional is true, but a language model "
                       r"is causal: .* see the very token it must predict"):  # fmt: skip
        config_from_dict(lm_config(tmp_path / "t.txt", bidirectional=True))


def test_a_bidirectional_model_leaks_and_its_training_perplexity_collapses(tmp_path):
    train = corpus(tmp_path / "corpus.txt")
    causal = train_quietly(config_from_dict(lm_config(train)), tmp_path / "causal")
    leaky = train_quietly(
        config_from_dict(lm_config(train, bidirectional=True, allow_leakage=True)),
        tmp_path / "leaky",
    )
    causal_row, leaky_row = last_row(tmp_path / "causal"), last_row(tmp_path / "leaky")
    # Teacher-forced on its own training text, the leaky model reads each answer: near 1.
    assert float(leaky_row["train_perplexity"]) < 1.5
    # The causal model cannot beat the words' frequencies (24 equally likely words, plus </s>).
    assert float(causal_row["train_perplexity"]) > 15
    assert float(causal_row["dev_perplexity"]) > 15
    # The check sees the leak, and passes the causal model.
    batch = collate_lm([LanguageModel.load(causal).encode(["w1", "w2", "w3", "w4", "w5"])])
    check_causal(LanguageModel.load(causal).model, batch, vocab_size=27)
    from bistack.causality import LeakageError

    with pytest.raises(LeakageError):
        check_causal(LanguageModel.load(leaky).model, batch, vocab_size=27)


def test_train_evaluate_and_sample_from_the_command_line(tmp_path, capsys):
    rng = random.Random(0)
    lines = [f"the {a} sat on the {b} ." for a, b in zip(rng.choices(["cat", "dog"], k=200),
             rng.choices(["mat", "rug"], k=200), strict=True)]  # fmt: skip
    train = tmp_path / "train.txt"
    train.write_text("\n".join(lines) + "\n")
    config = tmp_path / "lm.yaml"
    config.write_text(yaml.safe_dump(lm_config(train, epochs=6)))
    assert main(["train", str(config), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    model = str(tmp_path / "run" / "model")
    capsys.readouterr()
    held_out = tmp_path / "dev.txt"
    held_out.write_text("the dog sat on the rug .\n")
    assert main(["evaluate", model, str(held_out), "--json"]) == 0
    assert 1.0 < yaml.safe_load(capsys.readouterr().out)["perplexity"] < 3.0  # learnt the pattern
    assert (
        main(["sample", model, "the", "--temperature", "0.5", "--seed", "1", "--count", "2"]) == 0
    )
    samples = capsys.readouterr().out.splitlines()
    assert len(samples) == 2 and all(s.startswith("the ") for s in samples)
    assert samples[0].split()[1] in {"cat", "dog"}
    assert main(["predict", model, "the cat"]) == 2
    assert "use bistack sample" in capsys.readouterr().err
    again = LanguageModel.load(model).sample("the", 30, 0.5, seed=1)
    assert samples[0] == " ".join(["the", *again])  # a seed makes a sample repeatable
    # Sampling's options are its card's: the command line and the server take and refuse alike.
    for flags, said in (
        (["--temperature", "0"], "--temperature: must be > 0 and <= 10, got 0"),
        (["--tokens", "501"], "--tokens: must be between 1 and 500, got 501"),
        (["--seed", str(10**30)], "--seed: must be between 0 and 9223372036854775807"),
        (["--seed", "-1"], "--seed: must be between 0 and 9223372036854775807, got -1"),
    ):
        with pytest.raises(SystemExit):
            main(["sample", model, "the", *flags])
        said_now = capsys.readouterr().err
        assert said in said_now and "Traceback" not in said_now
    assert main(["sample", model, "the", "--seed", str(2**63 - 1), "--count", "2"]) == 2
    assert "the last seed passes 2^63-1" in capsys.readouterr().err
    # From Python: the same ranges, and a prompt that is not valid Unicode, refused by name.
    from bistack.cards import RequestError
    from bistack.predictor import open_model

    opened = open_model(model)
    for seed in (2**64, 10**30, -1):
        with pytest.raises(RequestError, match="seed: between 0 and 9223372036854775807"):
            opened.sample("the", seed=seed)
    with pytest.raises(RequestError, match="prompt: not valid Unicode: a lone surrogate"):
        opened.sample("the \ud800", seed=1)
    pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    with TestClient(create_app(load_served(model))) as client:
        body = {"prompt": "the", "temperature": 0.5, "seed": 1, "tokens": 30}
        assert client.post("/sample", json=body).json()["continuation"] == " ".join(again)
        refusals = (
            {"temperature": 0},
            {"tokens": 501},
            {"seed": "1"},
            {"tokens": True},
            {"seed": 10**30},
            {"seed": 2**64},
            {"seed": -1},
        )
        for refused in refusals:
            answer = client.post("/sample", json={"prompt": "the", **refused})
            assert answer.status_code == 422, refused
        lone = client.post(  # JSON's escape of a lone surrogate, as a client may send it
            "/sample",
            content='{"prompt": "the \\ud800", "seed": 1}',
            headers={"content-type": "application/json"},
        )
        assert lone.status_code == 422 and "lone surrogate" in lone.text
        schema = client.get("/openapi.json").json()["components"]["schemas"]["SampleRequest"]
        assert '"maximum": 500' in json.dumps(schema["properties"]["tokens"])
