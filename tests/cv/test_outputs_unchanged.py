"""A refactor of the cross-validation's code changes no output: the suite's small CVs (a
classifier, a tagger, three layer regressors), their blend and an exported fold ensemble write
what the commit recorded in ``tests/fixtures/cv_outputs/expected.json`` wrote, byte for byte
(a fold's seconds and its model folder's digest aside: ``record.py`` says how it runs)."""

import json
from pathlib import Path

import pytest

from tests.fixtures.cv_outputs.record import digests, run_all

pytest.importorskip("transformers", reason="the layer regressors need bistack[transformers]")
pytest.importorskip("onnxruntime", reason="the export needs bistack[onnx]")

EXPECTED = Path(__file__).parents[1] / "fixtures" / "cv_outputs" / "expected.json"


def test_cv_outputs_blends_and_exports_are_the_recorded_commits_byte_for_byte(tmp_path):
    recorded = json.loads(EXPECTED.read_text())
    run_all(tmp_path)
    found = digests(tmp_path)
    assert sorted(found) == sorted(recorded["digests"]), "the files written changed"
    changed = [name for name, digest in recorded["digests"].items() if found[name] != digest]
    assert not changed, f"changed since commit {recorded['commit'][:7]}: {changed}"
