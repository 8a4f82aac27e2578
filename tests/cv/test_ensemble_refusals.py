"""Token weights asked of a fold ensemble (or its export) are refused in every face with what
the model is and what to do instead: explain or predict with one of its members. Its members,
which attend, explain."""

import pytest
import yaml

from bistack.cli import main
from bistack.errors import ConfigError
from bistack.predictor import open_model
from tests.cv.test_cross_validation import write_config, write_rows

ADVICE = "explain or predict with one of its members (its members/ folder, such as members/fold0)"


@pytest.fixture(scope="module")
def attending_cv(tmp_path_factory):
    """A finished 2-fold CV of a classifier with additive attention, and its export."""
    pytest.importorskip("onnxruntime", reason="export needs the onnx extra (bistack[onnx])")
    root = tmp_path_factory.mktemp("attending-cv")
    config = write_config(root, write_rows(root / "train.tsv", 24))
    data = yaml.safe_load(config.read_text())
    data["pooling"] = {"type": "additive"}
    config.write_text(yaml.safe_dump(data))
    out = root / "out"
    assert main(["cv", str(config), "--output", str(out), "--folds", "2", "--no-progress"]) == 0
    assert main(["export", str(out / "model"), "--output", str(root / "export")]) == 0
    return out / "model", root / "export"


@pytest.mark.parametrize("which", ["ensemble", "export"])
def test_explain_and_predict_attention_on_an_ensemble_name_it_and_its_members(
    attending_cv, tmp_path, capsys, which
):
    model = dict(zip(["ensemble", "export"], attending_cv, strict=True))[which]
    capsys.readouterr()
    assert main(["explain", str(model), "a nice film", "--output", str(tmp_path / "ex")]) == 2
    said = capsys.readouterr().err
    assert "an ensemble of 2 fold models" in said and ADVICE in said
    assert "'additive' or 'dot' pooling" not in said  # no contradiction with its own pooling
    assert not (tmp_path / "ex").exists()
    assert main(["predict", str(model), "a nice film", "--attention"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("error: --attention: ") and ADVICE in said
    with pytest.raises(ConfigError, match="an ensemble has no one attention to show"):
        open_model(model).predict(["a nice film"], attention=True)
    member = model / "members" / "fold0"
    assert main(["explain", str(member), "a nice film", "--output", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m" / "explain.html").is_file()


def test_the_server_answers_attention_on_an_ensemble_with_a_422_naming_it(attending_cv):
    pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    with TestClient(create_app(load_served(attending_cv[0]))) as client:
        answer = client.post("/predict", json={"texts": ["a nice film"], "attention": True})
    assert answer.status_code == 422
    assert "an ensemble has no one attention to show" in answer.text
