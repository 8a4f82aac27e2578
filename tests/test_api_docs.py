"""The API reference builds from the docstrings with every warning an error (what ``make docs``
runs), so a broken docstring or a module that no longer imports fails the suite. A test, not
a step before the suite, so that it runs beside the other tests rather than ahead of them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_the_api_reference_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("pdoc", reason="the API reference needs pdoc (the dev extra)")
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "pdoc", "bistack", "-o", str(tmp_path)],
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "bistack.html").is_file() and (tmp_path / "bistack" / "tasks.html").is_file()
