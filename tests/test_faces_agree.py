"""One option, one answer: the Python API takes and refuses what the command line takes and
refuses (the server's side is in ``tests/serve/test_app.py``)."""

from __future__ import annotations

import pytest

import bistack
from bistack.errors import ConfigError


def test_resume_and_overwrite_together_are_refused_in_python_as_on_the_command_line(tmp_path):
    from bistack.cli import main

    with pytest.raises(ConfigError, match=r"resume .* overwrite .*: give one of them"):
        bistack.train("recipe:conll03-bilstm-crf", tmp_path / "run", resume=True, overwrite=True)
    assert not (tmp_path / "run").exists()
    argv = ["train", "recipe:conll03-bilstm-crf", "--output", str(tmp_path / "run")]
    assert main([*argv, "--resume", "--overwrite"]) == 2


@pytest.mark.parametrize("size", [0, -1])
def test_a_batch_size_below_one_is_refused_by_every_model(small_tagger, small_classifier, size):
    from bistack.api import Classifier, Tagger

    with pytest.raises(ValueError, match=f"batch_size must be a whole number >= 1, got {size}"):
        Tagger.load(small_tagger).predict(["John lives here ."], batch_size=size)
    with pytest.raises(ValueError, match=f"batch_size must be a whole number >= 1, got {size}"):
        Classifier.load(small_classifier).predict(["a fine film"], batch_size=size)
