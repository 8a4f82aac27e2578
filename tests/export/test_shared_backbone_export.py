"""An exported ensemble or blend over a shared frozen backbone holds the backbone's graph once
(``stages/``) and each member's head alone, runs the backbone once a batch for every member
(counted through the onnxruntime session the runtime opens), and predicts as the PyTorch
ensemble does; a member opened alone still predicts, and members over no shared backbone keep
their whole graphs."""

import json
from pathlib import Path

import numpy as np
import pytest

import bistack
from bistack.cli import main
from bistack.predictor import open_model
from tests.blends.test_blend import layer_regressor
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

pytest.importorskip("onnxruntime", reason="exporting needs bistack[onnx]")
pytest.importorskip("transformers", reason="the layer models need bistack[transformers]")

TEXTS = ["a fine and warm film", "dull , slow and long", "the best of the year", "fine"]


@pytest.fixture(scope="module")
def cvs(tmp_path_factory) -> tuple[Path, Path, Path]:
    """Two CVs of one table over one frozen tiny transformer (reading each layer's mean, and
    its CLS vector), and a recurrent one: the table's folder and the three outputs."""
    from tests.fixtures.written_models.make_fixtures import tiny_transformer

    root = tmp_path_factory.mktemp("shared-backbone")
    rows = [(text, float(label)) for text, label in sentiment_rows(30, 0)]
    train = write_tsv(root / "train.tsv", rows)
    backbone = tiny_transformer(root / "tiny-bert")
    outputs = []
    for name, vectors in (("mean", "mean"), ("cls", "cls")):
        config = layer_regressor(train, backbone, root / "cache", "lstm")
        config["layer_pooling"] |= {"vectors": vectors, "lstm_hidden": 8}
        config["train"]["max_epochs"] = 2
        bistack.cross_validate(config, root / name, folds=3, say=lambda _: None, inner_dev=True)
        outputs.append(root / name)
    recurrent = text_config(train, None, kind="regressor", train={"max_epochs": 2})
    recurrent["data"]["dev"] = None
    bistack.cross_validate(recurrent, root / "rnn", folds=3, say=lambda _: None, inner_dev=True)
    return root, outputs[0], outputs[1]


def exported(model: Path, target: Path) -> Path:
    assert main(["export", str(model), "--output", str(target)]) == 0
    return target


def values(model_dir: Path) -> np.ndarray:
    return np.array([p.values["label"] for p in open_model(model_dir).predict(TEXTS)])


def test_an_exported_fold_ensemble_holds_its_backbone_once(cvs, tmp_path):
    _, mean, _ = cvs
    out = exported(mean / "model", tmp_path / "ensemble")
    stages = sorted((out / "stages").iterdir())
    assert [s.name for s in stages] == ["stage0"]
    stage = json.loads((stages[0] / "stage.json").read_text())
    assert stage["kinds"] == ["mean"]
    one = exported(mean / "folds" / "fold0" / "model", tmp_path / "one")  # a whole graph
    whole = (one / "model.onnx").stat().st_size
    heads = [m / "model.onnx" for m in sorted((out / "members").iterdir())]
    for head in heads:
        meta = json.loads((head.parent / "export.json").read_text())
        assert meta["stage"] == "../../stages/stage0" and meta["format_version"] == 3
        assert head.stat().st_size < whole / 3  # the head alone
    total = sum(h.stat().st_size for h in heads) + (stages[0] / "model.onnx").stat().st_size
    assert total <= 1.3 * whole  # three heads, one backbone: against one whole member's graph
    np.testing.assert_allclose(values(out), values(mean / "model"), rtol=1e-5, atol=1e-5)
    # A member opened alone reads its stage itself, as its ensemble does.
    alone = values(out / "members" / "fold0")
    np.testing.assert_allclose(alone, values(mean / "folds" / "fold0" / "model"), atol=1e-5)
    info = open_model(out).info()
    assert info["graph_bytes"] == total


def test_the_backbone_graph_runs_once_a_batch_for_every_member(cvs, tmp_path):
    _, mean, cls = cvs
    blended = bistack.blend([mean, cls], tmp_path / "blend", say=lambda _: None)
    out = exported(tmp_path / "blend" / "model", tmp_path / "export")
    stage = json.loads((out / "stages" / "stage0" / "stage.json").read_text())
    kept = [kind for kind in ("cls", "mean") if blended.weights[kind] > 0]
    assert stage["kinds"] == kept
    model = open_model(out)
    members = model.model.members
    stages = {id(member.stage) for member in members}
    assert len(stages) == 1  # opened once, handed to every member
    session = members[0].stage.session
    calls = []

    class Counting:
        def run(self, names, feed):
            calls.append(len(feed["text_index"]))
            return session.run(names, feed)

        def __getattr__(self, name):
            return getattr(session, name)

    members[0].stage.session = Counting()
    got = [p.values["label"] for p in model.predict(TEXTS, batch_size=2)]
    assert sum(calls) == len(TEXTS) and len(calls) == 2  # each text once, for all members
    torch_side = values(tmp_path / "blend" / "model")
    np.testing.assert_allclose(got, torch_side, rtol=1e-5, atol=1e-5)


def test_members_over_no_shared_backbone_keep_their_whole_graphs(cvs, tmp_path):
    root, mean, _ = cvs
    bistack.blend([root / "rnn", mean], tmp_path / "blend", say=lambda _: None, method="greedy")
    out = exported(tmp_path / "blend" / "model", tmp_path / "export")
    record = json.loads((tmp_path / "blend" / "blend.json").read_text())
    kept = [r["name"] for r in record["runs"] if r["weight"] > 0]
    for member in sorted((out / "members").iterdir()):
        meta = json.loads((member / "export.json").read_text())
        assert ("stage" in meta) == member.name.startswith("mean-"), member.name
    assert kept
    np.testing.assert_allclose(
        values(out), values(tmp_path / "blend" / "model"), rtol=1e-5, atol=1e-5
    )


def test_an_exported_layer_tagger_ensemble_holds_its_backbone_once(tmp_path):
    """K layer taggers over one frozen backbone: one backbone graph, K taggers' heads, run
    once a batch, tags equal to the PyTorch ensemble's and confidences within 1e-5."""
    from tests.conftest import tiny_config
    from tests.cv.test_cross_validation import write_documents
    from tests.fixtures.written_models.make_fixtures import tiny_transformer

    train = write_documents(tmp_path / "train.txt", 6, 8)
    config = tiny_config(train, None, train={"max_epochs": 2, "patience": 2})
    config |= {
        "kind": "layer_tagger",
        "backbone": {
            "path": str(tiny_transformer(tmp_path / "tiny-bert")),
            "cache_dir": str(tmp_path / "cache"),
        },
        "subwords": "mean",
        "features": {"word_dim": 8, "char_encoder": "none", "casing_dim": 2},
    }
    bistack.cross_validate(config, tmp_path / "cv", folds=3, say=lambda _: None)
    out = exported(tmp_path / "cv" / "model", tmp_path / "export")
    assert [s.name for s in (out / "stages").iterdir()] == ["stage0"]
    for member in (out / "members").iterdir():
        assert json.loads((member / "export.json").read_text())["stage"] == "../../stages/stage0"
    texts = ["Paul praised Rome yesterday .", "Zeda visited Paris .", "the cat sat"]
    model = open_model(out)
    stage = model.model.members[0].stage
    assert {id(member.stage) for member in model.model.members} == {id(stage)}
    before = stage.passes
    onnx = [p.to_json() for p in model.predict(texts)]
    assert stage.passes - before == 1  # one batch: the backbone ran once for the 3 members
    torch_side = [p.to_json() for p in open_model(tmp_path / "cv" / "model").predict(texts)]
    for got, want in zip(onnx, torch_side, strict=True):
        assert [t["tag"] for t in got["tokens"]] == [t["tag"] for t in want["tokens"]]
        assert [t["confidence"] for t in got["tokens"]] == pytest.approx(
            [t["confidence"] for t in want["tokens"]], abs=1e-5
        )
    # A stage of another backbone's shape is named when the ensemble opens.
    from bistack.errors import ModelFileError

    written = out / "stages" / "stage0" / "stage.json"
    record = json.loads(written.read_text())
    written.write_text(json.dumps(record | {"shape": [record["shape"][0] + 1, 4]}))
    with pytest.raises(ModelFileError, match="is not this ensemble's shared backbone"):
        open_model(out)


def test_a_stage_that_does_not_match_its_members_is_refused_in_one_sentence(cvs, tmp_path, capsys):
    """A stage copied from another export, an edited ``stage.json``, or a member recording
    another backbone's shape: named when the model opens, never a KeyError or an onnxruntime
    error inside a later run."""
    import shutil

    _, mean, cls = cvs
    mean_out = exported(mean / "model", tmp_path / "mean")
    cls_out = exported(cls / "model", tmp_path / "cls")
    stage = mean_out / "stages" / "stage0"
    kept = tmp_path / "kept-stage"
    shutil.copytree(stage, kept)

    def refused(said: str) -> None:
        assert main(["predict", str(mean_out), "a fine film"]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err, err
        assert err.strip().count("\n") == 0, err

    shutil.rmtree(stage)
    shutil.copytree(cls_out / "stages" / "stage0", stage)  # another export's stage
    refused("reads the 'mean' vectors, which the stage does not serve (it serves 'cls')")
    shutil.rmtree(stage)
    shutil.copytree(kept, stage)
    record = json.loads((stage / "stage.json").read_text())
    (stage / "stage.json").write_text(json.dumps(record | {"kinds": ["mean", "max"]}))
    refused("says its graph serves 'max'")
    (stage / "stage.json").write_text(json.dumps(record | {"shape": [7, 99]}))
    refused("where the stage gives [7, 99]")
    (stage / "stage.json").write_text(json.dumps(record))
    assert main(["predict", str(mean_out), "a fine film"]) == 0
