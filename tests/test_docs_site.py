"""The documentation site builds from docs/ with every warning an error (what ``make docs``
runs: a broken docstring, a page missing from the navigation or a link to nowhere fails the
suite), and opens in a browser: its pages, the API reference of the public modules and its
search, with no request leaving the machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the documentation site needs the dev extra")
    output = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(output)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env=os.environ | {"HF_HUB_OFFLINE": "1", "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return output


@pytest.mark.slow
def test_every_page_is_built_and_the_reference_covers_the_public_modules(site):
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"index.md", "tagging.md", "layer-pooling.md", "performance.md"} <= pages
    for page in pages:
        assert (site / page.replace(".md", ".html")).is_file(), page
    reference = (site / "reference" / "blocks.html").read_text()
    assert "RecurrentEncoder" in reference and "layer_vectors" in reference
    assert "bistack.runs.loop" not in (site / "reference" / "models.html").read_text()


@pytest.mark.slow
def test_the_site_opens_in_a_browser_offline(site):
    from tests.serve.test_page import CHROMIUM, CHROMIUM_ARGS, playwright  # skips without it

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        elsewhere: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(("file://", "data:"))
                else elsewhere.append(r.url))  # fmt: skip
        page.goto((site / "index.html").as_uri())
        assert "bistack" in page.title()
        page.click("text=Pooling over transformer layers")
        page.wait_for_selector("h1")
        assert "layer_vectors" in page.inner_text("article")
        page.goto((site / "reference" / "blocks.html").as_uri())
        assert page.query_selector("[id='bistack.encoders.RecurrentEncoder']")
        assert elsewhere == [], elsewhere
        browser.close()


GUIDES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "index.md")
BLOCKS = ["encoders", "cells", "crf", "pooling", "layer_pooling", "masking", "dropout", "schemes",
          "causality"]  # fmt: skip
USED = ["Tagger.predict", "Tagger.predict_tokens", "Tagger.evaluate", "Classifier.predict",
        "Regressor.predict", "LayerPoolingTagger.predict", "LayerPoolingClassifier.predict",
        "LanguageModel.sample", "LanguageModel.load"]  # fmt: skip


def reference_ids(site: Path) -> set[str]:
    import re

    html = "".join(p.read_text() for p in (site / "reference").glob("*.html"))
    return set(re.findall(r'id="(bistack\.[\w.]+)"', html))


@pytest.mark.slow
def test_every_guide_has_sections_and_the_reference_every_public_name(site):
    import importlib

    for guide in GUIDES:
        assert "<h2" in (site / guide.name.replace(".md", ".html")).read_text(), guide.name
    ids = reference_ids(site)
    import bistack.api as api

    wanted = []
    for name in dir(api):
        found = getattr(api, name)
        wanted.append(f"{found.__module__}.{found.__qualname__}")
    for owner, method in (used.split(".") for used in USED):
        found = getattr(api, owner)
        wanted.append(f"{found.__module__}.{found.__qualname__}.{method}")
    for block in BLOCKS:
        module = importlib.import_module(f"bistack.{block}")
        wanted += [
            f"{module.__name__}.{name}"
            for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
        ]
    assert sorted(set(wanted) - ids) == []
    assert "bistack.text_models.text.as_array" not in ids  # helpers stay out of it
    html = "".join(p.read_text() for p in (site / "reference").glob("*.html"))
    assert ":class:<code>" not in html and ":func:<code>" not in html  # roles rendered


def test_the_search_finds_a_key_by_its_own_name(site):
    """``group_column``, ``eval_every``, ``layer_lr_decay`` are found where the pages write them
    under their sections (``data.group_column``): the search splits words at dots too."""
    import json
    import re

    index = json.loads((site / "search" / "search_index.json").read_text())
    split = re.compile(index["config"]["separator"])
    texts = [re.sub(r"<[^>]+>", " ", d["text"]) for d in index["docs"]]  # the words shown
    words = {w.lower() for text in texts for w in split.split(text)}
    assert {"group_column", "eval_every", "layer_lr_decay"} <= words


@pytest.mark.slow
def test_search_answers_where_the_readme_says_to_open_the_site(site):
    from tests.serve.test_page import CHROMIUM, CHROMIUM_ARGS, playwright  # skips without it

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        # From the disk, as the README says; typed as a user types, once the page has loaded (a
        # query set before the search has started is not run).
        page.goto((site / "index.html").as_uri(), wait_until="networkidle")
        deadline = time.monotonic() + 180
        while True:
            page.click("input.md-search__input")
            page.keyboard.press("Control+A")
            page.keyboard.type("calibration")
            try:
                page.wait_for_selector(".md-search-result__item", timeout=10_000)
                break
            except playwright.TimeoutError:
                assert time.monotonic() < deadline, "the search never answered"
        assert "emperature" in page.inner_text(".md-search-result")
        browser.close()
