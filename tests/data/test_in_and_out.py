"""Data in the shapes users have, and predictions in the shapes their tools take: Parquet and
HuggingFace datasets for text models, CoNLL-U part-of-speech tagging, pretrained vectors whose
words join the vocabulary, predictions as CoNLL-U, doccano, spaCy Docs and HuggingFace dicts,
and training from Python."""

from __future__ import annotations

import json
import struct
import subprocess

import pytest
import torch

import bistack
from bistack.api import Tagger
from bistack.data.conllu import read_conllu
from bistack.data.tables import read_table
from bistack.errors import ConfigError, DataError
from tests.conftest import tiny_config, tiny_sentences, write_conll
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv
from tests.warm_commands import warm_bistack

UPOS = {"visited": "VERB", "left": "VERB", "loves": "VERB", "praised": "VERB"}


def rows(count: int, seed: int) -> list[dict]:
    return [{"sentence": t, "label": y} for t, y in sentiment_rows(count, seed)]


def test_parquet_and_datasets_folders_read_like_tsv(tmp_path):
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("pyarrow")
    import pandas

    table = rows(30, 0)
    tsv = write_tsv(tmp_path / "t.tsv", [(r["sentence"], r["label"]) for r in table])
    expected = read_table(tsv, "sentence", ["label"])
    pandas.DataFrame(table).to_parquet(tmp_path / "t.parquet")
    assert read_table(tmp_path / "t.parquet", "sentence", ["label"]) == expected
    dataset = datasets.Dataset.from_list(table)
    dataset.save_to_disk(str(tmp_path / "one"))
    assert read_table(tmp_path / "one", "sentence", ["label"]) == expected
    datasets.DatasetDict({"train": dataset}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(DataError, match="a DatasetDict: point the config at one of its splits"):
        read_table(tmp_path / "dict", "sentence", ["label"])
    assert read_table(tmp_path / "dict" / "train", "sentence", ["label"]) == expected
    pandas.DataFrame([{"sentence": "fine", "label": None}]).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(DataError) as error:
        read_table(tmp_path / "bad.parquet", "sentence", ["label"])
    bad = tmp_path / "bad.parquet"
    message = "label 'label' is null (null); expected a class name or a number"
    assert str(error.value) == f"{bad}: row 1: {message}"


def test_bistack_train_takes_datasets_objects_and_overrides(tmp_path):
    datasets = pytest.importorskip("datasets")
    config = text_config("unused.tsv", "unused.tsv")
    result = bistack.train(
        config,
        output=tmp_path / "run",
        overrides={"train.max_epochs": 2, "data.dev": None},
        train_data=datasets.Dataset.from_list(rows(200, 0)),
        dev_data=datasets.Dataset.from_list(rows(40, 1)),
    )
    assert result.fit.epochs == 2
    model = result.load()
    recorded = json.loads((result.model_dir / "config.json").read_text())
    assert recorded["config"]["data"]["train"] == "memory:train"
    assert model.predict(["a lovely film"])[0].label in ("0", "1")
    with pytest.raises(ConfigError, match="hand over tables of texts"):
        bistack.train(tiny_config("a", "b"), tmp_path / "x", train_data=rows(5, 0))


def test_two_trainings_from_python_at_once_each_read_their_own_tables(tmp_path):
    """Tables handed over to ``bistack.train`` go with that call alone: two calls running at
    once in one process (threads) never see each other's rows."""
    import threading

    config = text_config("unused.tsv", "unused.tsv", train={"max_epochs": 1})
    tables = {
        "sentiment": [{"sentence": r["sentence"], "label": r["label"]} for r in rows(60, 0)],
        "letters": [
            {"sentence": r["sentence"], "label": "xyz"[i % 3]} for i, r in enumerate(rows(60, 1))
        ],
    }
    labels, failures = {}, []

    def train(name: str) -> None:
        try:
            data = tables[name]
            result = bistack.train(config, tmp_path / name, train_data=data, dev_data=data[:12])
            labels[name] = result.load().labels
        except Exception as error:  # reported below, with the thread's name
            failures.append((name, error))

    threads = [threading.Thread(target=train, args=(name,)) for name in tables]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert labels == {"sentiment": ["0", "1"], "letters": ["x", "y", "z"]}
    with pytest.raises(DataError, match="no rows were handed over under this name"):
        read_table("memory:train", "sentence", ["label"])


def test_training_runs_in_bf16_mixed_precision(tmp_path):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(60, 0))
    config = tiny_config(train, None, train={"max_epochs": 1})
    result = bistack.train(config, tmp_path / "run", precision="bf16-mixed")
    tags = [s.tags for s in result.load().predict(["Anna visited Paris yesterday."])[0]]
    assert len(tags[0]) == 5


def write_conllu_tagged(path, sentences) -> None:
    blocks = []
    for number, sentence in enumerate(sentences, start=1):
        lines = [f"# sent_id = {number}"]
        for i, (token, ner) in enumerate(sentence, start=1):
            upos = (
                "PROPN" if ner != "O" else UPOS.get(token, "NOUN" if token.isalpha() else "PUNCT")
            )
            lines.append(f"{i}\t{token}\t_\t{upos}\t_\t_\t_\t_\t_\tNER={ner}")
        blocks.append("\n".join(lines) + "\n\n")
    path.write_text("".join(blocks))


def test_a_part_of_speech_tagger_trains_on_conllu_and_is_scored_by_accuracy(tmp_path):
    write_conllu_tagged(tmp_path / "train.conllu", tiny_sentences(150, 0))
    write_conllu_tagged(tmp_path / "dev.conllu", tiny_sentences(30, 1))
    config = tiny_config(
        tmp_path / "train.conllu",
        tmp_path / "dev.conllu",
        data={"scheme": "none", "tag_field": "upos"},
        train={"max_epochs": 4, "patience": 4},
    )
    done = bistack.train(config, tmp_path / "pos")
    header = (tmp_path / "pos" / "metrics.csv").read_text().splitlines()[0]
    assert "dev_token_accuracy" in header
    tagger = done.load()
    assert tagger.evaluate(tmp_path / "dev.conllu").token_accuracy == 100.0
    result = tagger.predict(["Anna visited Paris yesterday."])[0]
    assert result.entities == [] and result.sentences[0].tags[:2] == ["PROPN", "VERB"]
    written = tmp_path / "out.conllu"
    written.write_text(result.to_conllu())
    assert read_conllu(written, "upos")[0].tags == result.sentences[0].tags


def test_a_span_file_trains_a_tagger(tmp_path):
    records = [
        {"text": f"{name} visited {place} yesterday.", "label": [[0, len(name), "PER"]]}
        for name, place in [("Anna", "Rome"), ("Paul", "Paris"), ("Mary", "Berlin")] * 20
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    done = bistack.train(tiny_config(path, path, train={"max_epochs": 3}), tmp_path / "run")
    assert done.load().evaluate(path).micro.f1 > 0


def vectors_file(tmp_path, dim: int, binary: bool):
    words = {"zanzibar": [0.25] * dim, "anna": [0.5] * dim, "paris": [-0.5] * dim}
    if binary:
        path = tmp_path / "vectors.bin"
        body = b"".join(
            w.encode() + b" " + struct.pack(f"<{dim}f", *v) + b"\n" for w, v in words.items()
        )
        path.write_bytes(f"{len(words)} {dim}\n".encode() + body)
    else:
        path = tmp_path / "vectors.vec"
        lines = [f"{len(words)} {dim}"] + [
            f"{w} " + " ".join(map(str, v)) for w, v in words.items()
        ]
        path.write_text("\n".join(lines) + "\n")
    return path, words


@pytest.mark.parametrize("binary", [False, True])
def test_a_word_only_in_the_vectors_is_known_at_prediction_time(tmp_path, binary):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(80, 0))
    path, words = vectors_file(tmp_path, 16, binary)
    features = {"pretrained": str(path), "word_dim": 16, "freeze_pretrained": True}
    config = tiny_config(train, None, features=features, train={"max_epochs": 2})
    tagger = bistack.train(config, tmp_path / "run").load()
    vocabulary = tagger.vocabularies.words
    assert "zanzibar" in vocabulary  # never in the training data
    weight = tagger.model.embedder.word_embedding.weight
    for word, vector in words.items():
        assert torch.equal(weight[vocabulary.lookup(word)], torch.tensor(vector)), word
    encoded = tagger.vocabularies.encode(["Zanzibar", "Atlantis"])
    assert encoded.words[0] == vocabulary.lookup("zanzibar") and encoded.words[1] == 1


def test_vectors_of_another_width_are_an_error_naming_the_file(tmp_path):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(20, 0))
    path, _ = vectors_file(tmp_path, 8, binary=True)
    config = tiny_config(train, None, features={"pretrained": str(path), "word_dim": 16})
    with pytest.raises(DataError) as error:
        bistack.train(config, tmp_path / "run")
    assert str(error.value) == f"{path}:1: the vectors have 8 values, features.word_dim is 16"


def test_predictions_convert_to_spacy_docs_and_huggingface_dicts(small_tagger):
    pytest.importorskip("spacy")
    text = "  Anna visited\nNew York  yesterday.  Paul left Rome yesterday."
    (prediction,) = Tagger.load(small_tagger).predict(text)
    assert prediction.entities
    doc = prediction.to_spacy()
    assert doc.text == text
    assert [(e.start_char, e.end_char, e.label_) for e in doc.ents] == [
        (e.start, e.end, e.type) for e in prediction.entities
    ]
    assert len(list(doc.sents)) == len(prediction.sentences)
    pipeline = prediction.to_huggingface()
    assert pipeline == [
        {
            "entity_group": e.type,
            "score": e.confidence,
            "word": e.text,
            "start": e.start,
            "end": e.end,
        }
        for e in prediction.entities
    ]
    assert all(text[d["start"] : d["end"]] == d["word"] for d in pipeline)


def test_predict_writes_conllu_and_doccano(small_tagger, tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("Anna visited Paris yesterday.\nPaul left New York yesterday.\n")
    for fmt in ("conllu", "doccano"):
        done = subprocess.run(
            [*warm_bistack(), "predict", str(small_tagger), "--input", str(texts), "--format", fmt],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        (tmp_path / f"out.{fmt}").write_text(done.stdout)
    predicted = Tagger.load(small_tagger).predict(texts.read_text().splitlines())
    back = read_conllu(tmp_path / "out.conllu", "misc:NER", plain=False)
    assert [s.tags for s in back] == [s.tags for p in predicted for s in p]
    assert back[0].metadata == {"text": "Anna visited Paris yesterday."}
    lines = (tmp_path / "out.doccano").read_text().splitlines()
    # Each record also carries its input line, which doccano keeps as metadata.
    records = [json.loads(line) for line in lines]
    assert [r.pop("line") for r in records] == list(range(1, len(predicted) + 1))
    assert records == [p.to_doccano() for p in predicted]
