"""The page bistack serve shows at /, driven in a real browser (Playwright and Chromium): a user
types a text, clicks, and sees entities, probability bars, values or a continuation; what they
type is shown as text, never run as HTML."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bistack.predictor import load_model
from bistack.tasks import config_from_dict
from tests.conftest import train_quietly
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
playwright = pytest.importorskip("playwright.sync_api", reason="needs the browser extra")

CHROMIUM = os.environ.get("BISTACK_CHROMIUM") or shutil.which("chromium")
if CHROMIUM is None and os.environ.get("BISTACK_REQUIRE_BROWSER"):
    pytest.fail("BISTACK_REQUIRE_BROWSER is set (as .ci/run sets it) but there is no Chromium")
if CHROMIUM is None:
    pytest.skip(
        "no Chromium on this machine (Debian: apt-get install chromium; .ci/run installs it)",
        allow_module_level=True,
    )
# As root, in a machine with no network: no sandbox, and none of Chromium's own connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def serving(model_dir: Path) -> Iterator[str]:
    """``bistack serve`` on a free port, as a user starts it; yields its address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bistack", "serve", str(model_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()  # printed once the port is bound
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert match, f"serve did not start: {line}{process.stderr.read()}"
        yield match.group(0)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def ask(page, address: str, text: str) -> None:
    page.goto(address)
    page.wait_for_function("document.getElementById('run').textContent !== 'Predict'")
    page.fill("#input", text)
    page.click("#run")


def shown_text(page) -> str:
    """The tagged text as the page shows it, without the entity badges (type, confidence)."""
    return page.evaluate(
        """() => {
            const copy = document.querySelector('.tagged').cloneNode(true);
            copy.querySelectorAll('.type, .conf').forEach((badge) => badge.remove());
            return copy.textContent;
        }"""
    )


@pytest.fixture(scope="module")
def exported_tagger(small_tagger, tmp_path_factory) -> Path:
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    output = tmp_path_factory.mktemp("exported") / "onnx"
    done = subprocess.run(
        [sys.executable, "-m", "bistack", "export", str(small_tagger), "--output", str(output)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return output


@pytest.mark.parametrize("served", ["model directory", "exported directory"])
def test_a_tagger_page_highlights_entities_by_type(
    browser, small_tagger, exported_tagger, tmp_path, served
):
    model = small_tagger if served == "model directory" else exported_tagger
    with serving(model) as address:
        page = browser.new_page()
        ask(page, address, "John visited Paris yesterday. Mary left New York .")
        page.wait_for_selector("mark.entity")
        marks = page.query_selector_all("mark.entity")
        found = [
            (m.get_attribute("data-type"), m.query_selector(".entity-text").inner_text())
            for m in marks
        ]
        assert found == [("PER", "John"), ("LOC", "Paris"), ("PER", "Mary"), ("LOC", "New York")]
        # The type and the entity's probability show beside it (and on hover), in a colour of
        # its type that no other type shares.
        assert re.fullmatch(r"PER · \d+\.\d% sure", marks[0].get_attribute("title"))
        sure = [m.query_selector(".conf").inner_text() for m in marks]
        assert all(re.fullmatch(r"\d+%", said) for said in sure), sure
        colours = {m.get_attribute("data-type"): m.evaluate("e => e.style.background")
                   for m in marks}  # fmt: skip
        assert len(set(colours.values())) == len(colours) == 2, colours
        about = page.inner_text("#about")
        assert "IOB" not in about and "entity types: LOC, PER" in about
        # The whole text is there, entities in place.
        assert shown_text(page) == "John visited Paris yesterday. Mary left New York ."
        # The threshold leaves entities less sure than it unmarked, and brings them back.
        page.fill("#threshold", "1")
        page.dispatch_event("#threshold", "input")
        assert len(page.query_selector_all("mark.entity.below")) == len(marks)
        page.fill("#threshold", "0")
        page.dispatch_event("#threshold", "input")
        assert not page.query_selector_all("mark.entity.below")
        page.screenshot(path=str(tmp_path / "tagger-page.png"), full_page=True)


def test_a_classifier_page_shows_bars_that_sum_to_one_and_attention(
    browser, small_classifier, tmp_path
):
    with serving(small_classifier) as address:
        page = browser.new_page()
        ask(page, address, "the acting was superb")
        page.wait_for_selector(".bar")
        bars = page.query_selector_all(".bar")
        probabilities = {
            b.get_attribute("data-label"): float(b.get_attribute("data-probability")) for b in bars
        }
        assert set(probabilities) == {"0", "1"}
        assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-6)
        shown = page.query_selector(".label").get_attribute("data-label")
        assert shown == max(probabilities, key=probabilities.get) == "1"
        tokens = page.query_selector_all(".token")
        assert [t.inner_text() for t in tokens] == ["the", "acting", "was", "superb"]
        weights = [float(t.get_attribute("data-weight")) for t in tokens]
        assert sum(weights) == pytest.approx(1.0, abs=1e-5)
        page.screenshot(path=str(tmp_path / "classifier-page.png"), full_page=True)


HOSTILE = [
    "<script>window.__pwned = 1</script> John left Paris .",
    '"><img src=x onerror="window.__pwned = 1"> Mary visited Rome .',
]


@pytest.mark.parametrize("text", HOSTILE)
def test_what_a_user_types_is_shown_as_text_never_as_html(browser, small_tagger, text):
    with serving(small_tagger) as address:
        page = browser.new_page()
        ask(page, address, text)
        page.wait_for_selector(".result")
        assert page.evaluate("window.__pwned") is None
        assert page.query_selector_all("#results img, #results script") == []
        assert shown_text(page) == text  # there, as the characters typed


def test_a_regressor_page_shows_its_value_in_original_units(browser, tmp_path):
    rows = [(text, 10.0 + len(text.split())) for text, _ in sentiment_rows(150, 0)]
    train = write_tsv(tmp_path / "train.tsv", rows, header=("sentence", "score"))
    dev = write_tsv(tmp_path / "dev.tsv", rows[:30], header=("sentence", "score"))
    config = text_config(train, dev, kind="regressor", train={"max_epochs": 2})
    config["data"]["label_columns"] = ["score"]
    model_dir = train_quietly(config_from_dict(config), tmp_path / "run")
    text = "the film was superb and moving"
    expected = load_model(model_dir).predict([text])[0].values["score"]
    with serving(model_dir) as address:
        page = browser.new_page()
        ask(page, address, text)
        value = page.wait_for_selector(".value")
        assert value.get_attribute("data-target") == "score"
        assert float(value.get_attribute("data-value")) == pytest.approx(expected, abs=1e-6)
        assert value.inner_text() == f"{expected:.3f}"


def test_a_language_model_page_samples_a_continuation(browser, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join("the cat sat on the mat" for _ in range(60)) + "\n")
    config = {
        "kind": "language_model",
        "data": {"train": str(corpus), "dev_fraction": 0.1, "tokenizer": "whitespace"},
        "features": {"word_dim": 8},
        "encoder": {"hidden_size": 16, "bidirectional": False},
        "optimizer": {"name": "adam", "lr": 0.02},
        "train": {"max_epochs": 3},
    }
    model_dir = train_quietly(config_from_dict(config), tmp_path / "lm")
    with serving(model_dir) as address:
        page = browser.new_page()
        ask(page, address, "the cat")
        continuation = page.wait_for_selector(".continuation")
        words = continuation.inner_text().split()
        assert words and set(words) <= {"the", "cat", "sat", "on", "mat", "<unk>"}


def test_the_interactive_docs_work_offline(browser, small_tagger):
    """/docs renders the API (Swagger UI) from files the server itself serves: no request leaves
    this machine, as on a machine without internet access."""
    with serving(small_tagger) as address:
        page = browser.new_page()
        elsewhere: list[str] = []
        page.on(
            "request",
            lambda request: (
                None
                if request.url.startswith((address, "data:"))
                else elsewhere.append(request.url)
            ),
        )
        page.goto(address + "/docs")
        page.wait_for_selector(".opblock-summary-path", timeout=20_000)
        paths = [p.inner_text() for p in page.query_selector_all(".opblock-summary-path")]
        assert {"/predict", "/info", "/health"} <= set(paths)
        assert "/sample" not in paths  # a tagger does not sample: not offered
        assert elsewhere == [], elsewhere


def test_the_documentations_screenshot_is_made_by_its_script(small_tagger, tmp_path):
    """``examples/docs_screenshots.py`` (which made docs/serve-page.png) serves a tagger, types
    into its page in Chromium and pictures its entities."""
    script = Path(__file__).resolve().parents[2] / "examples" / "docs_screenshots.py"
    output = tmp_path / "page.png"
    done = subprocess.run(
        [sys.executable, str(script), str(small_tagger), str(output)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
