"""The one door into a model: every command opens a model directory through
``bistack.predictor.open_model``, which reads its metadata once and refuses there what an
exported model cannot do; no outlet asks whether a model was exported."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bistack.cli import main
from bistack.errors import ConfigError
from bistack.predictor import ModelSource, open_model
from tests.conftest import tiny_sentences, write_conll

SRC = Path(__file__).parents[1] / "src" / "bistack"
_OPENED: list[str] | None = None  # while counting: every file opened, by path


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], str | Path):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)  # an audit hook stays for the process: it counts only when asked


@contextmanager
def counting_opens() -> Iterator[list[str]]:
    """Every file this process opens inside the block, by path (the interpreter's audit
    events: whatever reads a file, json, safetensors or a reader of our own, is seen)."""
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


def reads_of(opened: list[str], path: Path) -> int:
    return sum(Path(p).resolve() == path.resolve() for p in opened)


@pytest.fixture(scope="module")
def exported_tagger(small_tagger, tmp_path_factory) -> Path:
    pytest.importorskip("onnx", reason="export needs the onnx extra (bistack[onnx])")
    output = tmp_path_factory.mktemp("door") / "onnx"
    assert main(["export", str(small_tagger), "--output", str(output)]) == 0
    return output


def test_predict_from_a_file_reads_the_model_config_once(small_tagger, tmp_path, capsys):
    """``bistack predict --input`` from the command line to the writer: config.json once."""
    data = write_conll(tmp_path / "tweets.txt", tiny_sentences(5), docstart=False)
    with counting_opens() as opened:
        assert main(["predict", str(small_tagger), "--input", str(data)]) == 0
    assert reads_of(opened, small_tagger / "config.json") == 1
    assert reads_of(opened, small_tagger / "vocab.json") == 1
    assert capsys.readouterr().out.count("\n\n") == 5  # one CoNLL block a sentence


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "{model}", "{data}"],
        ["info", "{model}"],
        ["predict", "{model}", "John lives in Paris .", "--format", "jsonl"],
    ],
    ids=["evaluate", "info", "predict"],
)
def test_every_command_reads_the_model_config_once(small_tagger, tmp_path, command, capsys):
    data = write_conll(tmp_path / "dev.txt", tiny_sentences(3))
    argv = [part.format(model=small_tagger, data=data) for part in command]
    with counting_opens() as opened:
        assert main(argv) == 0
    assert reads_of(opened, small_tagger / "config.json") == 1


def test_an_exported_model_is_read_once_and_refuses_precision_at_the_door(exported_tagger, capsys):
    with counting_opens() as opened:
        assert main(["predict", str(exported_tagger), "John lives here ."]) == 0
    assert reads_of(opened, exported_tagger / "export.json") == 1
    for command in (["predict", "John ."], ["evaluate", "x.txt"]):
        argv = [command[0], str(exported_tagger), *command[1:], "--precision", "bf16-mixed"]
        assert main(argv) == 2
        assert "is an exported model, which runs its graph in float32" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="exported model, which runs its graph in float32"):
        open_model(exported_tagger, precision="16-mixed")
    with pytest.raises(ConfigError, match="an exported model runs on onnxruntime's CPU"):
        ModelSource(str(exported_tagger), device="cuda").open()


def test_the_predictor_describes_either_kind_of_directory(small_tagger, exported_tagger):
    pytorch, exported = open_model(small_tagger).info(), open_model(exported_tagger).info()
    assert pytorch["parameters"] > 0 and pytorch["bistack_version"]
    assert exported["graph_bytes"] > 0 and exported["description"].endswith("(exported)")
    assert pytorch["labels"] == exported["labels"]


def test_no_outlet_asks_whether_a_model_was_exported():
    """Only the door (and the exported directory's own files) know an export from a model
    directory: a face or outlet that branched on it would treat the two apart."""
    allowed = {SRC / "predictor.py", SRC / "files" / "onnx_session.py"}
    askers = []
    for path in sorted(SRC.rglob("*.py")):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
            if name in ("exported", "is_exported", "read_export"):
                askers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert askers == []


# Where a model class's ``load`` may be called in the package: its definition, and a recipe
# reopening the best model it has just written (below the door, in the kind's own family).
OWN_LOADS = {
    SRC / "models" / "saved.py",
    SRC / "text_models" / "recipe.py",
    SRC / "text_models" / "layer_recipe.py",
}
MODEL_CLASSES = {"Tagger", "LayerPoolingTagger", "Classifier", "Regressor", "LanguageModel"}


def test_no_model_is_opened_past_the_door():
    """Cross-validation's fold models, export's members, compare-poolers' runs: each opened
    through ``open_model`` or the door's member opener, never by a model class's ``load``."""
    openers = []
    for path in sorted(SRC.rglob("*.py")):
        if path in OWN_LOADS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = ast.unparse(node.func.value)
            model_class = (
                "loader" in receiver
                or "model_class" in receiver
                or (receiver.split(".")[-1] in MODEL_CLASSES or receiver.startswith("type("))
            )
            if node.func.attr == "load" and model_class:
                openers.append(f"{path.relative_to(SRC)}:{node.lineno} {receiver}.load")
    assert openers == []


def test_a_model_class_refuses_an_ensemble_naming_the_door(tmp_path):
    """``Tagger.load`` cannot return K models: it names ``open_model`` and a member."""
    from bistack.errors import ModelFileError
    from bistack.files.ensemble_dir import write_ensemble
    from bistack.taggers.models.tagger import Tagger

    member = tmp_path / "fold0"
    member.mkdir()
    (member / "config.json").write_text("{}")
    write_ensemble(tmp_path / "ensemble", {"fold0": member}, {"kind": "tagger"})
    with pytest.raises(ModelFileError) as refused:
        Tagger.load(tmp_path / "ensemble")
    said = str(refused.value)
    assert "holds an ensemble of 1 model, not one Tagger" in said
    assert "bistack.api.open_model(" in said and "members/fold0" in said


def test_records_are_predicted_each_apart_by_the_opened_model(small_classifier):
    """Per-record prediction lives with the opened model: a record it cannot read costs only
    itself, and each carries its place when asked."""
    from bistack.inputs import Record
    from bistack.predictor import Failed

    model = open_model(small_classifier)
    records = [
        Record(value="a fine film", line=1),
        Record(value=["a", "list"], what="field 'text'", line=2),
        Record(error="not valid UTF-8", line=3),
        Record(value="dull", line=4),
    ]
    outcomes = model.predict_records(records, "jsonl", keeps_place=True)
    assert outcomes[0].startswith('{"line": 1,') and outcomes[3].startswith('{"line": 4,')
    assert outcomes[1] == Failed(
        "field 'text' is a list of tokens, which only a tagger takes; give a text"
    )
    assert outcomes[2] == Failed("not valid UTF-8")


def test_a_model_folder_this_user_may_not_read_is_said_as_such(small_tagger, monkeypatch):
    import os

    from bistack.errors import ModelFileError

    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: p != small_tagger and real(p, mode))
    with pytest.raises(ModelFileError, match="may not read the model folder"):
        open_model(small_tagger)
