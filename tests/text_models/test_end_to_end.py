"""Train, save, load and predict text classifiers and regressors on tiny fixtures."""

import csv
import json
import random

import pytest
import torch
import yaml

from bistack.api import Classifier, Regressor
from bistack.cli import main
from bistack.errors import ConfigError
from bistack.tasks import config_from_dict
from tests.conftest import train_quietly

POSITIVE = ["great", "superb", "lovely", "moving"]
NEGATIVE = ["awful", "dull", "boring", "clumsy"]
FILLER = ["the", "film", "was", "a", "plot", "and", "acting", "story", "quite", "really"]


def sentiment_rows(count, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        label = rng.randint(0, 1)
        words = rng.choices(FILLER, k=rng.randint(2, 12))
        words.insert(rng.randint(0, len(words)), rng.choice(POSITIVE if label else NEGATIVE))
        rows.append((" ".join(words), label))
    return rows


def write_tsv(path, rows, header=("sentence", "label")):
    path.write_text("\t".join(header) + "\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    return path


def text_config(train_path, dev_path, kind="classifier", **sections):
    config = {
        "kind": kind,
        "data": {
            "train": str(train_path),
            "dev": str(dev_path),
            "text_column": "sentence",
            "label_columns": ["label"],
            "tokenizer": "whitespace",
        },
        "features": {"word_dim": 16, "char_encoder": "none", "casing_dim": 0, "unk_replace": 0.0},
        "encoder": {"hidden_size": 16, "outer_dropout": 0.1},
        "optimizer": {"name": "adam", "lr": 0.01},
        "train": {"batch_size": 16, "max_epochs": 6, "patience": 6},
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return config


@pytest.fixture
def sentiment(tmp_path):
    return (
        write_tsv(tmp_path / "train.tsv", sentiment_rows(300, 0)),
        write_tsv(tmp_path / "dev.tsv", sentiment_rows(60, 1)),
    )


@pytest.mark.parametrize("pooling", ["last", "mean", "max", "additive", "dot"])
def test_classifier_trains_saves_loads_and_predicts_the_same(tmp_path, sentiment, pooling):
    train, dev = sentiment
    config = config_from_dict(text_config(train, dev, pooling={"type": pooling}))
    model_dir = train_quietly(config, tmp_path / "run")
    classifier = Classifier.load(model_dir)
    texts = ["the acting was superb", "a dull and boring plot", "lovely"]
    attention = classifier.attends  # asked of a pooling that weighs no token: refused
    first = classifier.predict(texts, attention=attention)
    assert first == Classifier.load(model_dir).predict(texts, attention=attention)
    if not attention:
        with pytest.raises(ConfigError, match="which weighs no tokens"):
            classifier.predict(texts, attention=True)
    assert [p.label for p in first] == ["1", "0", "1"]
    assert abs(sum(first[0].probabilities.values()) - 1) < 1e-6
    metrics = classifier.evaluate(dev)
    assert metrics["accuracy"] >= 90
    # Temperature scaling was fitted on dev: kept, with its result in dev_metrics.json, where it
    # is a temperature to keep; on a dev set this easy it may collapse towards 0 (every
    # probability 1.0), and then the probabilities stay as trained.
    saved = json.loads((tmp_path / "run" / "dev_metrics.json").read_text())
    if "temperature" in classifier.output_info:
        assert 0.05 < classifier.outputs.temperature < 20
        fit = classifier.output_info["temperature_fit"]
        assert saved["expected_calibration_error"] == pytest.approx(fit["ece_after"])
    else:
        assert classifier.outputs.temperature == 1.0
    if pooling in ("additive", "dot"):
        weights = [w for _, w in first[1].attention]
        assert len(weights) == 5 and abs(sum(weights) - 1) < 1e-5
        assert metrics["attention"]["padding_mass"] == 0.0
    else:
        assert first[0].attention is None and "attention" not in metrics


def test_attention_on_real_batches_gives_padding_exactly_zero_weight(tmp_path, sentiment):
    train, dev = sentiment
    config = config_from_dict(text_config(train, dev, train={"max_epochs": 1}))
    classifier = Classifier.load(train_quietly(config, tmp_path / "run"))
    texts = ["great", "the film was a plot and acting story quite really dull " * 3]
    raw = classifier.run(texts, batch_size=2)
    assert raw.padding_mass == 0.0
    assert raw.weights[0] == [1.0]
    # A text scores the same alone as beside a much longer one.
    alone = classifier.run(texts[:1], batch_size=1)
    torch.testing.assert_close(raw.outputs[0], alone.outputs[0], atol=1e-6, rtol=0)


def intensity_rows(count, rng):
    """Texts whose target is 100 + 10 per "very" in them."""
    out = []
    for _ in range(count):
        very = rng.randint(0, 4)
        words = ["very"] * very + rng.choices(FILLER, k=rng.randint(1, 6))
        rng.shuffle(words)
        out.append((" ".join(words), 100 + 10 * very))
    return out


def test_regressor_reports_in_original_units(tmp_path):
    rng = random.Random(0)

    def rows(count):
        return intensity_rows(count, rng)

    train = write_tsv(tmp_path / "train.tsv", rows(300))
    dev = write_tsv(tmp_path / "dev.tsv", rows(60))
    config = config_from_dict(
        text_config(
            train, dev, kind="regressor", pooling={"type": "mean"}, train={"max_epochs": 10}
        )
    )
    model_dir = train_quietly(config, tmp_path / "run")
    regressor = Regressor.load(model_dir)
    metrics = regressor.evaluate(dev)
    assert metrics["rmse"] < 10  # the targets span 100..140 with std about 14
    assert metrics["per_target"]["label"]["pearson"] > 0.8
    value = regressor.predict(["very very very film"])[0].values["label"]
    assert 110 < value < 150


def test_cli_train_evaluate_predict_explain(tmp_path, sentiment, capsys):
    train, dev = sentiment
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(text_config(train, dev)))
    run = tmp_path / "run"
    assert main(["train", str(config), "--output", str(run), "--no-progress"]) == 0
    assert "dev attention: mean mass on the first token" in capsys.readouterr().out
    assert json.loads((run / "dev_metrics.json").read_text())["attention"]["padding_mass"] == 0
    assert main(["evaluate", str(run / "model"), str(dev), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert {"accuracy", "macro_f1", "confusion_matrix"} <= set(metrics)
    assert main(["predict", str(run / "model"), "superb story", "--attention"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["label"] == "1"
    assert [a["text"] for a in record["attention"]] == ["superb", "story"]
    out = tmp_path / "explain"
    assert main(["explain", str(run / "model"), "the plot was dull", "--output", str(out)]) == 0
    html = (out / "explain.html").read_text()
    assert "dull</span>" in html
    assert (out / "explain.png").read_bytes()[:4] == b"\x89PNG"


def test_an_unseen_label_at_evaluation_names_the_row(tmp_path, sentiment, capsys):
    train, dev = sentiment
    config = config_from_dict(text_config(train, dev, train={"max_epochs": 1}))
    model_dir = train_quietly(config, tmp_path / "run")
    other = write_tsv(tmp_path / "other.tsv", [("great", 1), ("so so", "neutral")])
    capsys.readouterr()
    assert main(["evaluate", str(model_dir), str(other)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {other}: row 2: label 'neutral' never appeared in training (known: 0, 1)"
    )


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("fine", "1.5"), ("good", "abc")], "row 2: target 'label' is not a number: 'abc'"),
        (
            [("fine", "1.5"), ("good", "NaN")],
            "row 2: target 'label' is 'NaN': it must be a finite number",
        ),
    ],
)
def test_bad_regression_targets_name_the_row(tmp_path, sentiment, capsys, rows, message):
    _, dev = sentiment
    train = write_tsv(tmp_path / "bad.tsv", rows)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(text_config(train, dev, kind="regressor")))
    assert main(["train", str(config)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {train}: {message}"


def test_explain_refuses_a_model_without_attention(tmp_path, sentiment, capsys):
    train, dev = sentiment
    config = config_from_dict(
        text_config(train, dev, pooling={"type": "mean"}, train={"max_epochs": 1})
    )
    model_dir = train_quietly(config, tmp_path / "run")
    capsys.readouterr()
    assert main(["explain", str(model_dir), "fine"]) == 2
    assert "pools with 'mean', which weighs no tokens" in capsys.readouterr().err


def test_multi_class_and_multi_target(tmp_path):
    rng = random.Random(0)
    cues = {"pos": POSITIVE, "neg": NEGATIVE, "neutral": ["okay", "average", "fine", "so-so"]}
    rows = []
    for _ in range(300):
        label = rng.choice(sorted(cues))
        words = [*rng.choices(FILLER, k=rng.randint(1, 8)), rng.choice(cues[label])]
        rng.shuffle(words)
        rows.append((" ".join(words), label))
    train, dev = (
        write_tsv(tmp_path / "t.tsv", rows[:250]),
        write_tsv(tmp_path / "d.tsv", rows[250:]),
    )
    config = config_from_dict(text_config(train, dev, pooling={"type": "max"}))
    classifier = Classifier.load(train_quietly(config, tmp_path / "cls"))
    assert classifier.labels == ["neg", "neutral", "pos"]
    metrics = classifier.evaluate(dev)
    assert metrics["accuracy"] > 90
    assert len(metrics["confusion_matrix"]["rows_gold_columns_predicted"]) == 3

    table = tmp_path / "targets.jsonl"
    table.write_text(
        "".join(
            json.dumps({"sentence": t, "length": len(t.split()), "cue": float(y == "pos")}) + "\n"
            for t, y in rows
        )
    )
    config = config_from_dict(
        text_config(
            table,
            table,
            kind="regressor",
            data={"label_columns": ["length", "cue"]},
            pooling={"type": "mean"},
            train={"max_epochs": 8},
        )
    )
    regressor = Regressor.load(train_quietly(config, tmp_path / "reg"))
    metrics = regressor.evaluate(table)
    assert set(metrics["per_target"]) == {"length", "cue"}
    assert metrics["rmse"] == pytest.approx(
        (metrics["per_target"]["length"]["rmse"] + metrics["per_target"]["cue"]["rmse"]) / 2
    )
    assert metrics["per_target"]["cue"]["pearson"] > 0.8


def test_calibration_is_fitted_on_dev_kept_with_the_model_and_never_hurts_dev(tmp_path):
    rng = random.Random(0)
    train = write_tsv(tmp_path / "train.tsv", intensity_rows(200, rng))
    dev_rows = [(text, value + 7) for text, value in intensity_rows(60, rng)]  # shifted targets
    dev = write_tsv(tmp_path / "dev.tsv", dev_rows)
    options = {"kind": "regressor", "pooling": {"type": "mean"}}
    plain = config_from_dict(text_config(train, dev, **options, train={"max_epochs": 4}))
    calibrated = config_from_dict(
        text_config(train, dev, **options, train={"max_epochs": 4}, regression={"calibrate": True})
    )
    before = Regressor.load(train_quietly(plain, tmp_path / "a"))
    after = Regressor.load(train_quietly(calibrated, tmp_path / "b"))
    scale, offset = after.output_info["calibration"][0]
    assert after.evaluate(dev)["rmse"] <= before.evaluate(dev)["rmse"] + 1e-6
    assert offset != 0.0
    raw = after.run(["very film"])
    uncalibrated = (
        float(raw.outputs[0, 0]) * after.output_info["std"][0] + after.output_info["mean"][0]
    )
    assert after.predict(["very film"])[0].values["label"] == pytest.approx(
        scale * uncalibrated + offset, rel=1e-5
    )


def test_calibrated_training_keeps_the_epoch_with_the_best_calibrated_dev_rmse(tmp_path):
    """Dev targets shifted by 50 (3.5 target standard deviations): uncalibrated, every epoch
    would score about 50. Epochs are compared as the model will be used, after calibration,
    and the kept one is the best."""
    rng = random.Random(1)
    train = write_tsv(tmp_path / "train.tsv", intensity_rows(200, rng))
    dev = write_tsv(tmp_path / "dev.tsv", [(t, v + 50) for t, v in intensity_rows(60, rng)])
    config = config_from_dict(
        text_config(
            train,
            dev,
            kind="regressor",
            pooling={"type": "mean"},
            train={"max_epochs": 5, "patience": 5},
            regression={"calibrate": True},
        )
    )
    model = Regressor.load(train_quietly(config, tmp_path / "run"))
    with (tmp_path / "run" / "metrics.csv").open() as handle:
        per_epoch = [float(row["dev_rmse"]) for row in csv.DictReader(handle)]
    assert len(per_epoch) == 5
    assert max(per_epoch) < 20.0
    assert model.evaluate(dev)["rmse"] == pytest.approx(min(per_epoch), rel=1e-4)
