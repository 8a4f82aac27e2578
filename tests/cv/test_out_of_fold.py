"""Out of fold means out of fold: in ``bistack cv``'s default mode (each fold stops early on its
held-out fold) nothing is fitted on the rows it is scored on. Each fold model stays as trained;
its held-out outputs are calibrated (a classifier's temperature, a regressor's scale and
offset, a tagger's entity temperature) by a fit on the other folds' out-of-fold outputs; the
ensemble keeps one fit on all the uncalibrated out-of-fold outputs. Refitting a fold's own
out-of-fold values on its gold therefore never gives back the identity, as it did when each
fold calibrated on its held-out fold."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import bistack
from bistack.metrics.text import class_temperature
from bistack.predictor import open_model
from tests.cv.test_cross_validation import write_documents, write_rows
from tests.text_models.test_end_to_end import text_config

FOLDS = 3


def cv_of(config: dict, out: Path) -> list[str]:
    said: list[str] = []
    bistack.cross_validate(config, out, folds=FOLDS, say=said.append)
    return said


def read_oof(out: Path) -> list[dict]:
    with (out / "oof.csv").open() as handle:
        return list(csv.DictReader(handle))


def fold_models(out: Path) -> list[tuple[str, list[int], object]]:
    """Each fold's name, held-out rows and model as it left training."""
    folds = []
    for fold in range(FOLDS):
        name = f"fold{fold}"
        held = json.loads((out / "folds" / name / "fold.json").read_text())["held"]
        folds.append((name, held, open_model(out / "folds" / name / "model")))
    return folds


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    root = tmp_path_factory.mktemp("oof-classifier")
    train = write_rows(root / "train.tsv", 60)
    config = text_config(train, None, train={"max_epochs": 3, "patience": 3})
    config["data"]["dev"] = None
    said = cv_of(config, root / "out")
    with train.open() as handle:
        texts = [row["sentence"] for row in csv.DictReader(handle, delimiter="\t")]
    return root / "out", texts, said


def member_probabilities(model, texts: list[str], labels: list[str]) -> np.ndarray:
    return np.array([[p.probabilities.get(k, 0.0) for k in labels] for p in model.predict(texts)])


def test_a_classifier_folds_temperature_never_sees_its_held_out_labels(classifier):
    out, texts, said = classifier
    oof = read_oof(out)
    labels = sorted({row["gold"] for row in oof})
    gold = np.array([labels.index(row["gold"]) for row in oof])
    written = np.array([[float(row[f"p_{k}"]) for k in labels] for row in oof])
    folds = fold_models(out)
    trained = np.zeros_like(written)
    for _, held, model in folds:  # each fold model as it left training: no temperature
        assert "temperature" not in json.loads((model.path / "config.json").read_text())["outputs"]
        trained[held] = member_probabilities(model, [texts[i] for i in held], labels)
    summary = json.loads((out / "cv.json").read_text())
    logits = np.log(np.clip(trained, 1e-30, None))
    for name, held, _ in folds:
        others = [i for i in range(len(oof)) if i not in set(held)]
        expected = class_temperature(logits[others], gold[others])  # the other folds' alone
        recorded = summary["fold_calibration"][name]
        assert recorded["temperature"] == pytest.approx(expected, rel=1e-6)
        assert name not in recorded["fitted_on"] and len(recorded["fitted_on"]) == FOLDS - 1
        scaled = np.exp(logits[held] / expected)
        np.testing.assert_allclose(written[held], scaled / scaled.sum(1, keepdims=True), atol=1e-5)
        # Refitting on the fold's own out-of-fold probabilities is no identity.
        refit = class_temperature(np.log(np.clip(written[held], 1e-30, None)), gold[held])
        assert abs(refit - 1.0) > 1e-3
    # The ensemble's temperature: one fit on every row's uncalibrated out-of-fold probabilities.
    ensemble = json.loads((out / "model" / "ensemble.json").read_text())
    assert ensemble["temperature"] == pytest.approx(class_temperature(logits, gold), rel=1e-5)
    assert "other folds' out-of-fold predictions" in summary["calibration"]
    assert any("calibration is fitted on the other folds'" in line for line in said)


def test_a_regressor_folds_calibration_never_sees_its_held_out_targets(tmp_path):
    train = write_rows(tmp_path / "train.tsv", 60)
    config = text_config(
        train, None, kind="regressor", train={"max_epochs": 3}, regression={"calibrate": True}
    )
    config["data"]["dev"] = None
    out = tmp_path / "out"
    cv_of(config, out)
    oof = read_oof(out)
    gold = np.array([float(row["gold_label"]) for row in oof])
    written = np.array([float(row["label"]) for row in oof])
    with train.open() as handle:
        texts = [row["sentence"] for row in csv.DictReader(handle, delimiter="\t")]
    trained = np.zeros_like(written)
    for _, held, model in fold_models(out):
        assert "calibration" not in json.loads((model.path / "config.json").read_text())["outputs"]
        trained[held] = [p.values["label"] for p in model.predict([texts[i] for i in held])]
    for _, held, _ in fold_models(out):
        others = [i for i in range(len(oof)) if i not in set(held)]
        scale, offset = np.polyfit(trained[others], gold[others], 1)  # the other folds' fit
        np.testing.assert_allclose(written[held], trained[held] * scale + offset, atol=1e-4)
        own_scale, own_offset = np.polyfit(written[held], gold[held], 1)
        assert abs(own_scale - 1) > 1e-4 or abs(own_offset) > 1e-4  # no identity
    # The ensemble's calibration: one fit on every row's uncalibrated out-of-fold values, used
    # by every prediction of the ensemble.
    ensemble = json.loads((out / "model" / "ensemble.json").read_text())
    [[scale, offset]] = ensemble["target_calibration"]
    np.testing.assert_allclose([scale, offset], np.polyfit(trained, gold, 1), rtol=1e-4, atol=1e-5)
    members = [open_model(p) for p in sorted((out / "model" / "members").iterdir())]
    sample = ["the acting was superb", "a dull plot"]
    mean = np.mean([[p.values["label"] for p in m.predict(sample)] for m in members], axis=0)
    got = [p.values["label"] for p in open_model(out / "model").predict(sample)]
    np.testing.assert_allclose(got, mean * scale + offset, atol=1e-5)


def test_a_tagger_folds_temperature_never_sees_its_held_out_entities(tmp_path):
    from bistack.data.conll import read_conll
    from bistack.taggers.emissions.calibration import dev_emissions, pooled_temperature
    from tests.conftest import tiny_config

    train = write_documents(tmp_path / "train.txt", 6, 16, noise=0.3, own_names=True)
    config = tiny_config(train, None, train={"max_epochs": 6, "patience": 6})
    out = tmp_path / "out"
    said = cv_of(config, out)
    assert f"3-fold cross-validation of 96 sentences of {train}" in said[0]
    sentences = read_conll(train)
    folds = fold_models(out)
    held_out = {}
    for name, held, model in folds:
        assert "temperature" not in model.model.calibration  # as trained
        held_out[name] = (dev_emissions(model.model, [sentences[i] for i in held]), model.model)
    summary = json.loads((out / "cv.json").read_text())
    records = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    for name, held, model in folds:
        parts = [(dev, m.decoder) for other, (dev, m) in held_out.items() if other != name]
        expected = pooled_temperature(parts)
        recorded = summary["fold_calibration"][name]
        assert recorded["fitted_on"] == [other for other in held_out if other != name]
        assert recorded.get("temperature") == (
            None if expected is None else pytest.approx(expected, rel=1e-6)
        )
        # The fold's out-of-fold confidences are its model's at that temperature.
        if expected is not None:
            model.model.calibration = model.model.calibration | {"temperature": expected}
        tokens = [sentences[i].tokens for i in held]
        again = [t.to_json() for t in model.model.predict_tokens(tokens)]
        for row, want in zip(held, again, strict=True):
            got = records[row]
            assert [e["confidence"] for e in got["entities"]] == pytest.approx(
                [e["confidence"] for e in want["entities"]], abs=1e-6
            )


def test_oof_csv_joins_back_to_the_table_on_its_id_and_a_fold_column_is_taken_exactly(tmp_path):
    pandas = pytest.importorskip("pandas", reason="the join is pandas'")
    train = write_rows(tmp_path / "rows.tsv", 24)
    table = pandas.read_csv(train, sep="\t")
    table.insert(0, "item_id", [f"item-{i:03d}" for i in range(len(table))][::-1])
    table["kfold"] = [(i * 7) % 3 for i in range(len(table))]  # a team's saved folds
    table.to_csv(tmp_path / "train.tsv", sep="\t", index=False)
    config = text_config(tmp_path / "train.tsv", None, train={"max_epochs": 1})
    config["data"] |= {"dev": None, "id_column": "item_id"}
    out = tmp_path / "out"
    bistack.cross_validate(config, out, folds=2, repeats=2, say=lambda _: None)
    oof = pandas.read_csv(out / "oof.csv")
    assert list(oof.columns[:4]) == ["row", "item_id", "fold_repeat1", "fold_repeat2"]
    joined = table.merge(oof, on="item_id")  # one merge, every row once
    assert len(joined) == len(table) and (joined["label"] == joined["gold"]).all()
    plan = json.loads((out / "folds.json").read_text())["assignments"]
    assert oof["fold_repeat1"].tolist() == plan[0] and oof["fold_repeat2"].tolist() == plan[1]
    records = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    assert [r["item_id"] for r in records] == table["item_id"].tolist()
    assert list(records[0])[:3] == ["row", "item_id", "fold"]
    # The team's folds, taken exactly from the column, by another model's CV.
    config["data"] |= {"fold_column": "kfold"}
    bistack.cross_validate(config, tmp_path / "given", folds=3, say=lambda _: None)
    given = json.loads((tmp_path / "given" / "folds.json").read_text())
    assert given["assignments"] == [table["kfold"].tolist()]
    assert given["split"] == "as given by column 'kfold'"


def test_oof_csv_keeps_each_row_whatever_its_id_holds(tmp_path):
    pandas = pytest.importorskip("pandas", reason="the table is read back as a user reads it")
    train = write_rows(tmp_path / "rows.tsv", 12)
    table = pandas.read_csv(train, sep="\t")
    awkward = ["cr\ronly", "a,b", 'say "hi"', "line\nbreak", "both\r\n", "tab\there"]
    table.insert(0, "item_id", [awkward[i % len(awkward)] + str(i) for i in range(len(table))])
    table.to_csv(tmp_path / "train.csv", index=False, quoting=csv.QUOTE_ALL)  # pandas leaves \r
    config = text_config(tmp_path / "train.csv", None, train={"max_epochs": 1})
    config["data"] |= {"dev": None, "id_column": "item_id"}
    bistack.cross_validate(config, tmp_path / "out", folds=2, say=lambda _: None)
    oof = pandas.read_csv(tmp_path / "out" / "oof.csv", dtype={"item_id": str})
    assert oof["item_id"].tolist() == table["item_id"].tolist()
    assert oof["row"].tolist() == list(range(1, len(table) + 1))


def test_a_fold_column_takes_no_setting_that_cannot_act_and_keeps_groups_whole(tmp_path, capsys):
    import yaml

    from bistack.cli import main

    pandas = pytest.importorskip("pandas", reason="the table is written as a user writes it")
    table = pandas.read_csv(write_rows(tmp_path / "rows.tsv", 24), sep="\t")
    table["kfold"] = [i % 3 for i in range(len(table))]  # author i % 8 spans folds
    table.to_csv(tmp_path / "train.tsv", sep="\t", index=False)
    config = text_config(tmp_path / "train.tsv", None, train={"max_epochs": 1})
    config["data"] |= {"dev": None, "fold_column": "kfold"}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cv = ["cv", str(path), "--folds", "3", "--output", str(tmp_path / "out")]
    assert main([*cv, "--split", "plain"]) == 2
    assert "--split plain deals the folds, and data.fold_column 'kfold' gives them" in (
        capsys.readouterr().err
    )
    grouped = ["--set", "data.group_column=author"]
    assert main([*cv, *grouped]) == 2
    said = capsys.readouterr().err
    assert "column 'author' 'author0' lies in folds 0 and 2 of column 'kfold' (row 9)" in said
    assert not (tmp_path / "out" / "folds").exists()
    train = ["train", str(path), "--output", str(tmp_path / "run"), "--set", "data.dev=null"]
    assert main([*train, "--set", "train.max_epochs=1"]) == 0
    assert "data.fold_column 'kfold' is read by bistack cv only" in capsys.readouterr().err


def test_a_calibrated_fold_shows_one_score_and_chooses_its_epoch_fitting_nothing_on_it(
    tmp_path, monkeypatch
):
    """A regressor calibrated after training, its folds stopping on their held-out rows: no
    epoch is chosen by a calibration fitted on the rows it is scored on, and each fold's score
    is the cross-fitted one wherever a fold's score is shown."""
    import re

    from bistack.text_models.outputs import TargetOutputs

    train = write_rows(tmp_path / "rows.tsv", 30)
    config = text_config(train, None, kind="regressor", train={"max_epochs": 3, "patience": 3})
    config["data"]["dev"] = None
    config["regression"] = {"calibrate": True}
    fitted_on: list[set[str]] = []
    real = TargetOutputs.fit_calibration

    def recording(self, examples, path, raw):
        fitted_on.append({e.text for e in examples})
        return real(self, examples, path, raw)

    monkeypatch.setattr(TargetOutputs, "fit_calibration", recording)
    said: list[str] = []
    out = tmp_path / "out"
    bistack.cross_validate(config, out, folds=3, say=said.append)
    plan = json.loads((out / "folds.json").read_text())["assignments"][0]
    texts = [line.split("\t")[0] for line in train.read_text().splitlines()[1:]]
    for fold in range(3):
        held = {text for text, f in zip(texts, plan, strict=True) if f == fold}
        assert held not in fitted_on, f"fold{fold}'s rows were fitted on"
    summary = json.loads((out / "cv.json").read_text())
    assert summary["folds_scored"].startswith("cross-fitted")
    for name, score in summary["folds"].items():
        shown = [float(m) for line in said if line.startswith(f"{name}:")
                 for m in re.findall(r"\d+\.\d{4}", line)]  # fmt: skip
        assert shown == [pytest.approx(score, abs=1e-4)], (name, said)


def test_a_repeated_cvs_score_is_recomputed_from_its_oof_csv(tmp_path):
    """With repeats, oof.csv holds one prediction column a repeat: the CV score is the mean of
    the repeats' pooled scores, and a user recomputing it from the file gets the same number;
    oof.jsonl holds the repeats' mean with each repeat's prediction, which a blend reads."""
    pandas = pytest.importorskip("pandas", reason="the table is read back as a user reads it")
    train = write_rows(tmp_path / "rows.tsv", 30)
    config = text_config(train, None, kind="regressor", train={"max_epochs": 2})
    config["data"]["dev"] = None
    out = tmp_path / "out"
    bistack.cross_validate(config, out, folds=3, repeats=2, say=lambda _: None)
    oof = pandas.read_csv(out / "oof.csv")
    assert list(oof.columns) == ["row", "fold_repeat1", "fold_repeat2", "gold_label",
                                 "label_repeat1", "label_repeat2"]  # fmt: skip
    scores = [
        float(np.sqrt(np.mean((oof[f"label_repeat{r}"] - oof["gold_label"]) ** 2))) for r in (1, 2)
    ]
    summary = json.loads((out / "cv.json").read_text())
    assert summary["cv_per_repeat"] == pytest.approx(scores, abs=1e-5)
    assert summary["cv"] == pytest.approx(float(np.mean(scores)), abs=1e-5)
    records = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    first = records[0]
    assert len(first["repeats"]) == 2
    mean = np.mean([r["values"]["label"] for r in first["repeats"]])
    assert first["values"]["label"] == pytest.approx(mean, abs=1e-5)
    assert oof["label_repeat1"].iloc[0] == pytest.approx(first["repeats"][0]["values"]["label"])
