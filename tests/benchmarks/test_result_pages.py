"""Results pages a script writes are never edited by hand: each base-size page rendered again
from its JSON (``benchmarks/base_size_pages.py``) is the committed page, byte for byte."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def script(name: str):
    """A benchmark script of ``benchmarks/``, imported as its own module."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "page",
    ["commonlit.md", "commonlit-top-layers.md", "sst2.md", "conll03.md", "flair-side-by-side.md"],
)
def test_each_base_size_page_is_its_json_rendered(page):
    module = script("base_size_pages")
    committed = (module.PAGES / page).read_text(encoding="utf-8")
    assert module.PAGE_MAKERS[page]() == committed, (
        f"benchmarks/results/base-size/{page} differs from what its JSON renders: run "
        ".venv/bin/python benchmarks/base_size_pages.py (and never edit the page by hand)"
    )


def test_the_top_layers_page_is_its_json_rendered():
    module = script("top_layers")
    record = json.loads((module.RESULTS / "top-layers.json").read_text())
    assert module.render(record) == (module.RESULTS / "top-layers.md").read_text()
