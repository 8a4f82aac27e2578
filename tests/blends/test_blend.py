"""``bistack blend``: cross-validated runs of one table and split, weighted on their out-of-fold
predictions, scored nested (no fold's weights are fitted on its own rows), and opened as one
model by every outlet (predict, evaluate, serve, export, info); a frozen backbone the runs
share reads each text once for all of them."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import bistack
from bistack.blends.run import nested
from bistack.cli import main
from bistack.data.tables import Example
from bistack.errors import ConfigError
from bistack.folds.weights import blended, simplex_weights
from bistack.models.backbone import TransformerBackbone
from bistack.predictor import open_model
from bistack.text_models.outputs import TargetOutputs
from tests.cv.test_cross_validation import write_rows
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

pytest.importorskip("transformers", reason="the layer models need bistack[transformers]")

FOLDS = 3
TEXTS = ["a fine and warm film", "dull , slow and long", "the best of the year"]


def layer_regressor(train: Path, backbone: Path, cache: Path, pooler: str) -> dict:
    return {
        "kind": "layer_regressor",
        "data": {"train": str(train), "dev": None, "text_column": "sentence",
                 "label_columns": ["label"]},
        "backbone": {"path": str(backbone), "max_length": 16, "cache_dir": str(cache)},
        "layer_pooling": {"type": pooler},
        "optimizer": {"name": "adamw", "lr": 0.02},
        "train": {"batch_size": 8, "max_epochs": 3, "patience": 3},
    }  # fmt: skip


@pytest.fixture(scope="module")
def regressor_cvs(tmp_path_factory) -> tuple[list[Path], Path]:
    """Three CVs of one table, one split (the same folds, seed and data): three poolers over
    one frozen tiny transformer."""
    from tests.fixtures.written_models.make_fixtures import tiny_transformer

    root = tmp_path_factory.mktemp("blend-regressors")
    rows = [(text, float(label) * 2 - 1 + 0.1 * (i % 5)) for i, (text, label) in
            enumerate(sentiment_rows(36, 0))]  # fmt: skip
    train = write_tsv(root / "train.tsv", rows)
    backbone = tiny_transformer(root / "tiny-bert")
    runs = []
    for pooler in ("mean", "weighted", "attention"):
        config = layer_regressor(train, backbone, root / "cache", pooler)
        bistack.cross_validate(config, root / pooler, folds=FOLDS, say=lambda _: None)
        runs.append(root / pooler)
    return runs, root


@pytest.fixture(scope="module")
def regressor_blend(regressor_cvs) -> tuple:
    runs, root = regressor_cvs
    said: list[str] = []
    result = bistack.blend(runs, root / "blend", say=said.append)
    return result, root / "blend", said


def oof_of(run: Path) -> tuple[np.ndarray, np.ndarray]:
    lines = [json.loads(line) for line in (run / "oof.jsonl").read_text().splitlines()]
    return np.array([r["values"]["label"] for r in lines]), np.array(
        [r["gold"]["label"] for r in lines]
    )


def test_the_weights_are_fitted_on_the_out_of_fold_predictions(regressor_cvs, regressor_blend):
    runs, _ = regressor_cvs
    result, out, said = regressor_blend
    stacked = np.stack([oof_of(run)[0] for run in runs])[:, :, None]
    gold = oof_of(runs[0])[1]
    examples = [Example("t", (repr(float(g)),), i) for i, g in enumerate(gold)]
    objective = TargetOutputs.applying_nothing({"targets": ["label"]}).blend_objective(examples)
    expected = simplex_weights(objective, stacked)
    assert list(result.weights.values()) == pytest.approx(expected.tolist(), abs=1e-6)
    rmse = float(np.sqrt(np.mean((blended(expected, stacked)[:, 0] - gold) ** 2)))
    assert result.in_sample == pytest.approx(rmse, rel=1e-5)
    assert result.in_sample <= min(result.runs.values()) + 1e-9  # the runs are each a blend
    record = json.loads((out / "blend.json").read_text())
    scores = {key: record["scores"][key] for key in ("nested", "in_sample")}
    assert scores == {"nested": result.nested, "in_sample": result.in_sample}
    assert [r["cv"] for r in record["runs"]] == list(result.runs.values())
    assert any(line.startswith("blend: nested rmse") for line in said)


def test_each_folds_weights_are_fitted_without_its_rows(regressor_cvs, regressor_blend):
    """The nested score: each fold's weights are those fitted on the other folds' rows alone,
    and the score is of the predictions those weights make of the fold's own rows."""
    runs, _ = regressor_cvs
    result, out, _ = regressor_blend
    record = json.loads((out / "blend.json").read_text())
    assignment = json.loads((runs[0] / "folds.json").read_text())["assignments"][0]
    stacked = np.stack([oof_of(run)[0] for run in runs])[:, :, None]
    gold = oof_of(runs[0])[1]
    outputs = TargetOutputs.applying_nothing({"targets": ["label"]})
    pooled = np.zeros(len(gold))
    for fold in range(FOLDS):
        others = [i for i, f in enumerate(assignment) if f != fold]
        held = [i for i, f in enumerate(assignment) if f == fold]
        examples = [Example("t", (repr(float(gold[i])),), i) for i in others]
        weights = simplex_weights(outputs.blend_objective(examples), stacked[:, others])
        recorded = record["nested_weights"][f"fold{fold}"]
        assert list(recorded.values()) == pytest.approx(weights.tolist(), abs=1e-6)
        pooled[held] = blended(weights, stacked[:, held])[:, 0]
        # each fold's nested score, recorded to compare blends fold by fold on the same folds
        fold_rmse = float(np.sqrt(np.mean((pooled[held] - gold[held]) ** 2)))
        assert record["scores"]["nested_by_fold"][fold] == pytest.approx(fold_rmse, rel=1e-5)
    assert result.nested == pytest.approx(float(np.sqrt(np.mean((pooled - gold) ** 2))), rel=1e-5)
    assert len(record["scores"]["nested_by_fold"]) == FOLDS


def test_the_nested_fit_never_sees_the_rows_it_predicts():
    seen: list[list[int]] = []

    def fit(rows: list[int]) -> np.ndarray:
        seen.append(rows)
        return np.array([0.5, 0.5])

    assignment = [0, 1, 2, 0, 1, 2, 2, 0]
    nested(fit, np.zeros((2, len(assignment), 1)), assignment)
    for fold, rows in enumerate(seen):
        held = {i for i, f in enumerate(assignment) if f == fold}
        assert held.isdisjoint(rows) and held | set(rows) == set(range(len(assignment)))


def test_the_blend_predicts_as_its_runs_weighted(regressor_cvs, regressor_blend):
    runs, _ = regressor_cvs
    result, out, _ = regressor_blend
    blend = open_model(out / "model")
    got = [p.values["label"] for p in blend.predict(TEXTS)]
    expected = np.zeros(len(TEXTS))
    for run, weight in zip(runs, result.weights.values(), strict=True):
        if weight > 0:
            own = open_model(run / "model").predict(TEXTS)
            expected += weight * np.array([p.values["label"] for p in own])
    assert got == pytest.approx(expected.tolist(), rel=1e-5, abs=1e-6)
    kept = [name for name, weight in result.weights.items() if weight > 0]
    assert (
        "blend of" in blend.description
        and f"{len(kept)} cross-validated run{'s' * (len(kept) != 1)} " in (blend.description)
    )
    members = sorted(p.name for p in (out / "model" / "members").iterdir())
    assert {m.rsplit("-", 1)[0] for m in members} == set(kept)  # a run of weight 0: left out


def test_a_backbone_the_runs_share_reads_each_text_once(regressor_blend, monkeypatch):
    _, out, _ = regressor_blend
    blend = open_model(out / "model")
    read: list[int] = []
    original = TransformerBackbone.layer_vectors

    def counted(self, texts, *args, **kwargs):
        read.append(len(texts))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(TransformerBackbone, "layer_vectors", counted)
    blend.predict(TEXTS)
    assert sum(read) == len(TEXTS)
    members = blend.model.members
    assert len(members) > 1 and all(m.backbone is members[0].backbone for m in members)


def test_every_outlet_opens_the_blend(regressor_cvs, regressor_blend, capsys, tmp_path):
    _, root = regressor_cvs
    result, out, _ = regressor_blend
    model = out / "model"
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    assert (
        main(["predict", str(model), "--input", str(texts), "--output", str(tmp_path / "p.csv")])
        == 0
    )
    table = (tmp_path / "p.csv").read_text().splitlines()
    assert table[0] == "row,label" and len(table) == 1 + len(TEXTS)  # no id: each line
    assert main(["evaluate", str(model), str(root / "train.tsv")]) == 0
    assert main(["info", str(model)]) == 0
    said = capsys.readouterr().out
    assert f"blended rmse: {result.nested:.4f} nested" in said
    exported = tmp_path / "export"
    assert main(["export", str(model), "--output", str(exported)]) == 0, capsys.readouterr().err
    onnx = open_model(exported).predict(TEXTS)
    torch_side = open_model(model).predict(TEXTS)
    assert [p.values["label"] for p in onnx] == pytest.approx(
        [p.values["label"] for p in torch_side], rel=1e-4, abs=1e-5
    )


def test_the_blend_serves_as_one_model(regressor_blend):
    pytest.importorskip("fastapi", reason="serving needs bistack[serve]")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    _, out, _ = regressor_blend
    with TestClient(create_app(load_served(out / "model"))) as client:
        answer = client.post("/predict", json={"texts": TEXTS})
        info = client.get("/info").json()
    assert answer.status_code == 200
    expected = [p.values["label"] for p in open_model(out / "model").predict(TEXTS)]
    got = [p["values"]["label"] for p in answer.json()["predictions"]]
    assert got == pytest.approx(expected, rel=1e-5)
    assert set(info["ensemble"]["blend"]) <= {"mean", "weighted", "attention"}


def test_classifiers_blend_their_probabilities(regressor_cvs, tmp_path):
    train = write_rows(tmp_path / "train.tsv", 48)
    runs = []
    for pooling in ("mean", "additive"):
        config = text_config(train, None, pooling={"type": pooling},
                             train={"max_epochs": 2, "patience": 2})  # fmt: skip
        config["data"]["dev"] = None
        bistack.cross_validate(config, tmp_path / pooling, folds=FOLDS, say=lambda _: None)
        runs.append(tmp_path / pooling)
    result = bistack.blend(runs, tmp_path / "blend", say=lambda _: None)
    assert result.metric == "accuracy"
    record = json.loads((tmp_path / "blend" / "blend.json").read_text())
    assert record["objective"].startswith("log loss")
    blend = open_model(tmp_path / "blend" / "model")
    texts = ["a good film", "a bad film"]
    got = blend.predict(texts)
    expected = None
    for run, weight in zip(runs, result.weights.values(), strict=True):
        if weight > 0:
            own = open_model(run / "model").predict(texts)
            labels = sorted(own[0].probabilities)
            probabilities = np.array([[p.probabilities[k] for k in labels] for p in own])
            expected = weight * probabilities + (0 if expected is None else expected)
    for prediction, row in zip(got, expected, strict=True):
        assert [prediction.probabilities[k] for k in labels] == pytest.approx(
            row.tolist(), abs=1e-5
        )
        assert sum(prediction.probabilities.values()) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ConfigError, match="is a CV of a recurrent text classifier, not a regres"):
        bistack.blend([regressor_cvs[0][0], runs[0]], tmp_path / "mixed", say=lambda _: None)
    # A tampered out-of-fold file is refused naming its line and what was expected.
    for tamper, said in TAMPERED_PROBABILITIES:
        copy = tampered(runs[1], tmp_path / "tampered", tamper)
        with pytest.raises(ConfigError, match=said) as error:
            bistack.blend([runs[0], copy], tmp_path / "b-tampered", say=lambda _: None)
        assert str(copy / "oof.jsonl") in str(error.value), tamper
        assert not (tmp_path / "b-tampered").exists()


def tampered(run: Path, copy: Path, tamper) -> Path:
    """A copy of the CV ``run`` whose ``oof.jsonl`` records went through ``tamper``."""
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run, copy)
    records = [json.loads(line) for line in (copy / "oof.jsonl").read_text().splitlines()]
    records = tamper(records)
    (copy / "oof.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return copy


def with_probability(value):
    def tamper(records):
        label = sorted(records[2]["probabilities"])[0]
        records[2]["probabilities"][label] = value
        return records

    return tamper


def renamed_class(records):
    probabilities = records[1]["probabilities"]
    label = sorted(probabilities)[0]
    probabilities["no-such-class"] = probabilities.pop(label)
    return records


def without_class(records):
    probabilities = records[1]["probabilities"]
    probabilities.pop(sorted(probabilities)[0])
    return records


TAMPERED_PROBABILITIES = [
    (with_probability(float("nan")), r"line 3: the probability of .* is nan, not a number in"),
    (with_probability(float("inf")), r"line 3: the probability of .* is inf"),
    (with_probability(7.5), r"line 3: the probability of .* is 7.5, not a number in \[0, 1\]"),
    (with_probability(-0.5), r"line 3: the probability of .* is -0.5"),
    (renamed_class, r"line 2: a probability of 'no-such-class', which is no class"),
    (without_class, r"line 2: no probability of the class"),
    (lambda records: records[:3] + records[4:], r"line \d+: row \d+ held out by fold"),
    (lambda records: records[:-1], r"rows, where folds.json deals"),
]


def test_a_tampered_regressors_oof_is_refused_by_line(regressor_cvs, tmp_path):
    runs, _ = regressor_cvs

    def value(number):
        def tamper(records):
            records[4]["values"]["label"] = number
            return records

        return tamper

    for tamper, said in [
        (value(float("nan")), r"line 5: the value of 'label' is nan, not a finite number"),
        (value(float("-inf")), r"line 5: the value of 'label' is -inf"),
        (value("high"), r"line 5: the value of 'label' is 'high'"),
        (lambda records: [records[1], records[0], *records[2:]], r"line 1: row 2 held out"),
    ]:
        copy = tampered(runs[1], tmp_path / "tampered", tamper)
        with pytest.raises(ConfigError, match=said):
            bistack.blend([runs[0], copy], tmp_path / "b", say=lambda _: None)


def test_runs_that_differ_are_refused_naming_the_difference(regressor_cvs, tmp_path):
    runs, root = regressor_cvs
    other = tmp_path / "other-split"
    config = layer_regressor(root / "train.tsv", root / "tiny-bert", root / "cache", "mean")
    config["data"]["split_seed"] = 7
    bistack.cross_validate(config, other, folds=FOLDS, say=lambda _: None)
    with pytest.raises(ConfigError, match="its folds are another split") as error:
        bistack.blend([runs[0], other], tmp_path / "b1", say=lambda _: None)
    assert "held out by its fold" in str(error.value)
    assert not (tmp_path / "b1").exists()
    with pytest.raises(ConfigError, match="given twice"):
        bistack.blend([runs[0], runs[0]], tmp_path / "b2")
    unfinished = tmp_path / "unfinished"
    shutil.copytree(runs[1], unfinished)
    (unfinished / "cv.json").unlink()
    with pytest.raises(ConfigError, match="has not finished"):
        bistack.blend([runs[0], unfinished], tmp_path / "b3")
    tagger = tmp_path / "tagger"
    shutil.copytree(runs[1], tagger)
    meta = json.loads((tagger / "model" / "ensemble.json").read_text())
    (tagger / "model" / "ensemble.json").write_text(json.dumps(meta | {"kind": "tagger"}))
    with pytest.raises(ConfigError, match=r"oof\.jsonl, line 1: not an out-of-fold tagging"):
        bistack.blend([runs[0], tagger], tmp_path / "b4")


def test_the_command_line_refuses_an_option_that_cannot_act(regressor_cvs, tmp_path, capsys):
    runs, _ = regressor_cvs
    argv = ["blend", *map(str, runs[:2]), "--output", str(tmp_path / "b"), "--rounds", "5"]
    assert main(argv) == 2
    assert "--rounds counts the greedy method's rounds" in capsys.readouterr().err
    assert main([*argv, "--method", "greedy"]) == 0
    record = json.loads((tmp_path / "b" / "blend.json").read_text())
    assert record["method"] == "greedy" and record["rounds"] == 5
    assert all(round(r["weight"] * 5, 9).is_integer() for r in record["runs"])
    assert main([*argv, "--method", "greedy"]) == 2  # an earlier blend there: --overwrite
    assert "--overwrite" in capsys.readouterr().err


def test_a_recurrent_run_blends_with_runs_over_a_transformer(regressor_cvs, tmp_path, capsys):
    """Runs of kinds that predict alike blend: a recurrent regressor trained from scratch with
    a regressor over the transformer's layers, on the same rows and folds; the blend opens,
    predicts, exports and describes itself with each member by its own kind."""
    runs, root = regressor_cvs
    config = text_config(root / "train.tsv", None, kind="regressor", pooling={"type": "mean"},
                         train={"max_epochs": 3, "patience": 3})  # fmt: skip
    config["data"]["dev"] = None
    bistack.cross_validate(config, tmp_path / "recurrent", folds=FOLDS, say=lambda _: None)
    result = bistack.blend([tmp_path / "recurrent", runs[0]], tmp_path / "blend", method="greedy",
                           rounds=4, say=lambda _: None)  # fmt: skip
    record = json.loads((tmp_path / "blend" / "blend.json").read_text())
    assert [r["kind"] for r in record["runs"]] == ["regressor", "layer_regressor"]
    weights = dict(result.weights)
    assert sum(weights.values()) == pytest.approx(1.0)
    blend = open_model(tmp_path / "blend" / "model")
    expected = np.zeros(len(TEXTS))
    for run, weight in zip([tmp_path / "recurrent", runs[0]], weights.values(), strict=True):
        if weight > 0:
            own = open_model(run / "model").predict(TEXTS)
            expected += weight * np.array([p.values["label"] for p in own])
    got = [p.values["label"] for p in blend.predict(TEXTS)]
    assert got == pytest.approx(expected.tolist(), rel=1e-5, abs=1e-6)
    if all(w > 0 for w in weights.values()):
        assert "recurrent text regressor or a regressor over" in blend.description
    exported = tmp_path / "export"
    assert main(["export", str(tmp_path / "blend" / "model"), "--output", str(exported)]) == 0
    onnx = [p.values["label"] for p in open_model(exported).predict(TEXTS)]
    assert onnx == pytest.approx(got, rel=1e-4, abs=1e-5)


def test_a_blend_refuses_what_it_cannot_take_in_one_clear_line(regressor_cvs, tmp_path, capsys,
                                                               monkeypatch):  # fmt: skip
    runs, _ = regressor_cvs
    argv = ["blend", *map(str, runs[:2]), "--output", str(tmp_path / "b"), "--method", "greedy"]
    with pytest.raises(SystemExit):
        main([*argv, "--rounds", "1000000000"])
    assert "between 1 and 10000" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="from 1 to 10,000"):
        bistack.blend(runs[:2], tmp_path / "b", method="greedy", rounds=10_001)
    with pytest.raises(ConfigError, match="is one path: give a list"):
        bistack.blend(str(runs[0]), tmp_path / "b")
    assert (
        main(["blend", str(runs[0]), str(tmp_path / "gone"), "--output", str(tmp_path / "b")]) == 2
    )
    assert f"{tmp_path / 'gone'}: no such folder" in capsys.readouterr().err

    def full_disk(source, destination, **_):
        raise shutil.Error([(source, f"{destination}/model.safetensors",
                             "[Errno 28] No space left on device")])  # fmt: skip

    monkeypatch.setattr(shutil, "copytree", full_disk)
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert "cannot write ([Errno 28] No space left on device)" in said and "[(" not in said
    assert not (tmp_path / "b").exists()


def test_a_blend_says_whether_it_beats_its_best_run_beyond_the_noise():
    from types import SimpleNamespace

    from bistack.blends.run import verdict

    gold = np.linspace(-1, 1, 40)
    assignment = [i % 4 for i in range(40)]
    card = SimpleNamespace(metric=SimpleNamespace(higher_is_better=False))

    def rmse(predictions, rows):
        return float(np.sqrt(np.mean((predictions[:, 0] - gold[rows]) ** 2)))

    def run(name, cv, noise):
        predictions = (gold + noise)[:, None]
        return SimpleNamespace(name=name, card=card, summary={"cv": cv}, predictions=predictions)

    rng = np.random.default_rng(0)
    best = run("lstm", 0.1, rng.normal(0, 0.1, 40))
    runs = [run("gru", 0.3, rng.normal(0, 0.3, 40)), best]
    own = {"gru": 0.3, "lstm": 0.1}
    losing = verdict(runs, own, best.predictions + 0.5, assignment, rmse)
    assert losing["best_run"] == "lstm" and losing["beyond_noise"] and not losing["blend_wins"]
    assert losing["says"].startswith("the nested blend loses to lstm, the best run, beyond")
    assert len(losing["per_fold"]) == 4 and losing["difference"] > 0  # RMSE: blend minus run
    # Against the run the CV would have picked fold by fold, chosen on the other folds alone.
    assert losing["picked"]["runs"] == ["lstm"] * 4 and losing["picked"]["outcome"] == "loses"
    assert "the run the CV would have picked on each fold" in losing["says"]
    winning = verdict(runs, own, gold[:, None], assignment, rmse)
    assert winning["beyond_noise"] and winning["blend_wins"]
    tied = verdict(runs, own, best.predictions[::-1].copy(), assignment, rmse)
    assert "within the noise" in tied["says"] or tied["beyond_noise"]


def test_the_verdict_is_in_blend_json_and_info(regressor_blend, capsys):
    result, out, said = regressor_blend
    record = json.loads((out / "blend.json").read_text())
    assert record["verdict"] == result.verdict
    assert any(line.startswith("verdict: the nested blend") for line in said)
    assert main(["info", str(out / "model")]) == 0
    assert record["verdict"]["says"] in capsys.readouterr().out


def test_runs_that_stopped_early_in_two_ways_are_refused_by_name(regressor_cvs, tmp_path):
    runs, root = regressor_cvs
    config = layer_regressor(root / "train.tsv", root / "tiny-bert", root / "cache", "mean")
    inner = tmp_path / "inner"
    bistack.cross_validate(config, inner, folds=FOLDS, inner_dev=True, say=lambda _: None)
    with pytest.raises(ConfigError, match="stopped early in two ways") as error:
        bistack.blend([runs[0], inner], tmp_path / "b", say=lambda _: None)
    said = str(error.value)
    assert f"{runs[0]} stopped on their held-out folds" in said
    assert f"{inner} stopped on a dev split of their training folds (--inner-dev)" in said


def test_a_blend_predicts_a_chunk_at_a_time_with_bounded_memory(regressor_blend, monkeypatch):
    """The shared frozen backbone's stage is computed a chunk of at most the predict batch at a
    time (one chunk's activations alive, whatever the number of texts), once a chunk for every
    run, and the predictions are those of one pass."""
    from bistack.text_models.layer_text import LayerPoolingTextModel

    _, out, _ = regressor_blend
    blend = open_model(out / "model")
    texts = [f"{t} {i}" for i, t in enumerate(TEXTS * 3)]  # 9 texts
    whole = [p.values["label"] for p in blend.predict(texts, batch_size=64)]
    sizes: list[int] = []
    real = LayerPoolingTextModel.shared_stage

    def counted(self, chunk, *args, **kwargs):
        sizes.append(len(chunk))
        return real(self, chunk, *args, **kwargs)

    monkeypatch.setattr(LayerPoolingTextModel, "shared_stage", counted)
    chunked = [p.values["label"] for p in blend.predict(texts, batch_size=4)]
    assert sizes == [4, 4, 1]  # one backbone pass a chunk, shared by every run
    assert chunked == pytest.approx(whole, abs=1e-5)


def test_the_verdict_holds_its_promise_at_the_folds_people_use():
    """At 3 folds a paired t of 2.5 is within the noise (the quantile is 4.30, where two
    standard errors would have called it); the quantiles are Student's."""
    from types import SimpleNamespace

    from scipy import stats

    from bistack.blends.run import verdict
    from bistack.metrics.noise import t_quantile_975

    for degrees in (1, 2, 3, 4, 10, 29, 30, 31, 60, 200):
        assert t_quantile_975(degrees) == pytest.approx(stats.t.ppf(0.975, degrees), abs=1e-3)
    card = SimpleNamespace(metric=SimpleNamespace(higher_is_better=True))
    spread = np.sqrt(3) / 2.5  # mean 1, standard deviation spread: t = 2.5 exactly
    per_fold = np.array([1 - spread, 1.0, 1 + spread])
    rows = np.arange(3)
    runs = [SimpleNamespace(name="run", card=card, summary={"cv": 0.0}, predictions=np.zeros(3))]

    def score(predictions, held):
        return float(predictions.sum())

    said = verdict(runs, {"run": 0.0}, per_fold, list(rows), score)
    assert said["t"] == pytest.approx(2.5) and said["t_needed"] == pytest.approx(4.303)
    assert "within the noise" in said["says"] and not said["beyond_noise"]
    assert "2 degrees of freedom" in said["says"]


def test_a_table_that_gains_a_fold_column_keeps_its_cvs(tmp_path):
    """A competitor's mid-project move: the folds a first CV dealt saved as a ``kfold``
    column, and the next CV reading them. The two are CVs of the same rows (their texts and
    targets), so they blend."""
    import csv

    train = write_rows(tmp_path / "train.tsv", 48)
    config = text_config(train, None, train={"max_epochs": 1, "patience": 1})
    config["data"]["dev"] = None
    bistack.cross_validate(config, tmp_path / "first", folds=FOLDS, say=lambda _: None)
    folds = json.loads((tmp_path / "first" / "folds.json").read_text())["assignments"][0]
    with train.open(newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    with (tmp_path / "with-folds.tsv").open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow([*rows[0], "kfold"])
        writer.writerows([*row, fold] for row, fold in zip(rows[1:], folds, strict=True))
    second = text_config(tmp_path / "with-folds.tsv", None, pooling={"type": "additive"},
                         train={"max_epochs": 1, "patience": 1})  # fmt: skip
    second["data"] |= {"dev": None, "fold_column": "kfold"}
    bistack.cross_validate(second, tmp_path / "second", folds=FOLDS, say=lambda _: None)
    result = bistack.blend([tmp_path / "first", tmp_path / "second"], tmp_path / "blend",
                           say=lambda _: None)  # fmt: skip
    assert sum(result.weights.values()) == pytest.approx(1.0)
