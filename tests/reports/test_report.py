"""Evaluation a user can look at: the report (report.html offline with its charts, report.json
with every figure) for every kind, PyTorch or exported; the error classes and the calibration
error held to hand computations; model cards and ``bistack info``."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from bistack.metrics.errors import classify, error_counts, type_confusion
from bistack.metrics.text import expected_calibration_error, reliability
from bistack.runs.model_card import read_card
from tests.conftest import tiny_sentences, write_conll

pytest.importorskip("matplotlib", reason="the report's charts need the plots extra")


def test_each_error_class_is_found_once_in_a_hand_made_pair():
    gold = [(0, 1, "PER"), (2, 4, "LOC"), (5, 7, "ORG"), (8, 9, "PER"), (10, 12, "LOC"),
            (14, 15, "MISC")]  # fmt: skip
    predicted = [
        (0, 1, "PER"),  # correct
        (2, 4, "ORG"),  # the right span, another type
        (5, 6, "ORG"),  # the right type, a shorter span
        (8, 10, "LOC"),  # overlapping PER, other boundaries and another type
        (13, 14, "PER"),  # overlaps nothing: spurious
    ]  # (10, 12, LOC) and (14, 15, MISC) are missed
    found = classify(gold, predicted)
    expected = {"correct": 1, "type": 1, "boundary": 1, "boundary and type": 1}
    assert error_counts([found]) == expected | {"missed": 2, "spurious": 1}
    assert found.pairs["type"] == [((2, 4, "LOC"), (2, 4, "ORG"))]
    assert found.pairs["boundary and type"] == [((8, 9, "PER"), (8, 10, "LOC"))]
    assert found.errors == 6
    types = ["LOC", "MISC", "ORG", "PER"]
    matrix = type_confusion([found], types)
    assert matrix[types.index("LOC")][types.index("ORG")] == 1  # LOC read as ORG
    assert matrix[types.index("MISC")][-1] == 1 and matrix[-1][types.index("PER")] == 1


def test_the_calibration_error_is_the_hand_computed_one():
    confidences, correct = [0.95, 0.95, 0.55, 0.55, 0.15], [True, False, True, True, False]
    # Bins (0.9, 1]: confidence 0.95, accuracy 0.5; (0.5, 0.6]: 0.55, 1; (0.1, 0.2]: 0.15, 0.
    expected = (2 * 0.45 + 2 * 0.45 + 1 * 0.15) / 5
    assert expected_calibration_error(confidences, correct) == pytest.approx(expected)
    bins = reliability(confidences, correct)
    assert [(b.count, b.accuracy) for b in bins] == [(1, 0.0), (2, 1.0), (2, 0.5)]
    assert math.isclose(bins[2].confidence, 0.95)


SCRIPT = "<script>alert(1)</script>"


def dev_with_markup(path: Path) -> Path:
    """Dev sentences, one whose person is written as markup (it must show as text), one whose
    gold types the tagger cannot agree with (its predictions there are wrong)."""
    sentences = tiny_sentences(20, seed=5)
    sentences.append([(SCRIPT, "I-PER"), ("visited", "O"), ("Rome", "I-LOC"), (".", "O")])
    sentences.append([("Mary", "I-LOC"), ("visited", "O"), ("Paris", "I-PER"), (".", "O")])
    return write_conll(path, sentences)


def report_of(model: Path, data: list[Path], directory: Path, capsys) -> dict:
    capsys.readouterr()
    argv = ["evaluate", str(model), *map(str, data), "--report", str(directory), "--json"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    record = json.loads((directory / "report.json").read_text())
    # report.json's scores are what evaluate --json prints, one section per data file.
    expected = [printed] if len(data) == 1 else [printed[str(p)] for p in data]
    assert [s["scores"] for s in record["sections"]] == expected
    return record


def test_a_tagger_report_has_every_section_and_its_figures(small_tagger, tmp_path, capsys):
    dev = dev_with_markup(tmp_path / "dev.txt")
    other = write_conll(tmp_path / "other.txt", tiny_sentences(10, seed=9))
    record = report_of(small_tagger, [dev, other], tmp_path / "report", capsys)
    first = record["sections"][0]
    assert set(first["errors"]) == {"correct", "type", "boundary", "boundary and type",
                                    "missed", "spurious"}  # fmt: skip
    assert sum(first["errors"].values()) >= first["scores"]["gold_entities"]
    assert (
        first["seen_unseen"]["seen"]["gold"] + first["seen_unseen"]["unseen"]["gold"]
        == (first["scores"]["gold_entities"])
    )
    assert 0 <= first["calibration"]["expected_calibration_error"] <= 1
    assert [f["type"] for f in first["figures"]] == ["bars", "matrix", "reliability"]
    pngs = sorted(p.name for p in (tmp_path / "report").glob("*.png"))
    assert pngs == sorted(f"{n}-{f['name']}.png" for n, s in enumerate(record["sections"])
                          for f in s["figures"])  # fmt: skip
    for png in pngs:
        assert (tmp_path / "report" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "report" / "report.html").read_text()
    assert SCRIPT not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_report_without_its_training_file_says_so_and_skips_seen_unseen(
    small_tagger, tmp_path, capsys
):
    model = shutil.copytree(small_tagger, tmp_path / "model")
    meta = json.loads((model / "config.json").read_text())
    meta["config"]["data"]["train"] = str(tmp_path / "gone.txt")
    (model / "config.json").write_text(json.dumps(meta))
    record = report_of(model, [dev_with_markup(tmp_path / "dev.txt")], tmp_path / "r", capsys)
    section = record["sections"][0]
    assert "seen_unseen" not in section
    assert any("is not there to read" in note for note in section["notes"])


def test_classifier_regressor_and_exported_reports(
    small_classifier, small_regressor, small_tagger, tmp_path, capsys
):
    from tests.text_models.test_end_to_end import sentiment_rows, write_tsv

    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(30, 4))
    record = report_of(small_classifier, [dev], tmp_path / "c", capsys)
    section = record["sections"][0]
    assert set(section["per_class"]) == {"0", "1"}
    assert [f["type"] for f in section["figures"]] == ["matrix", "bars", "reliability"]
    rows = [(t, float(sum(w in t for w in ("great", "lovely")))) for t, _ in sentiment_rows(30, 4)]
    scores = write_tsv(tmp_path / "scores.tsv", rows, header=("sentence", "score"))
    record = report_of(small_regressor, [scores], tmp_path / "r", capsys)
    section = record["sections"][0]
    assert set(section["per_target"]["score"]) == {"rmse", "mae"}
    assert section["per_target"]["score"]["rmse"] == pytest.approx(section["scores"]["rmse"])
    assert [f["type"] for f in section["figures"]] == ["scatter", "scatter"]
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    exported = tmp_path / "onnx"
    assert main(["export", str(small_tagger), "--output", str(exported)]) == 0
    dev = dev_with_markup(tmp_path / "dev.txt")
    onnx = report_of(exported, [dev], tmp_path / "e", capsys)["sections"][0]
    torch = report_of(small_tagger, [dev], tmp_path / "t", capsys)["sections"][0]
    assert onnx["errors"] == torch["errors"] and onnx["scores"] == torch["scores"]


def test_the_report_page_renders_offline_in_a_browser(small_tagger, small_classifier, tmp_path,
                                                       capsys):  # fmt: skip
    from tests.serve.test_page import CHROMIUM, CHROMIUM_ARGS, playwright  # skips without it
    from tests.text_models.test_end_to_end import sentiment_rows, write_tsv

    report_of(small_tagger, [dev_with_markup(tmp_path / "dev.txt")], tmp_path / "t", capsys)
    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(30, 4))
    report_of(small_classifier, [dev], tmp_path / "c", capsys)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for folder in ("t", "c"):
            page = browser.new_page()
            requests: list[str] = []
            dialogs: list[str] = []
            page.on("request", lambda r, seen=requests: seen.append(r.url))
            page.on("dialog", lambda d, seen=dialogs: (seen.append(d.message), d.dismiss()))
            page.goto((tmp_path / folder / "report.html").as_uri())
            page.wait_for_load_state("load")
            assert page.query_selector_all("section h2"), folder
            sizes = page.eval_on_selector_all("img", "els => els.map(e => e.naturalWidth)")
            assert sizes and all(width > 0 for width in sizes), folder  # every chart shows
            assert all(url.startswith("file://") for url in requests), requests
            assert not dialogs
            # The headline figures come first, before the summary table.
            first = page.inner_text("section .headline")
            assert ("entity F1" if folder == "t" else "accuracy") in first, first
            if folder == "t":
                assert SCRIPT in page.inner_text("body")  # shown as text, never run
                # Wrong predictions are marked apart from right ones, in another colour, and
                # every predicted entity shows its confidence as text, not only on hover.
                wrong = page.query_selector_all(".predicted.wrong")
                right = page.query_selector_all(".predicted.right")
                assert wrong and right
                colour = "el => getComputedStyle(el).backgroundColor"
                assert wrong[0].evaluate(colour) != right[0].evaluate(colour)
                shown = page.inner_text(".predicted.wrong .conf")
                assert float(shown) == pytest.approx(float(shown), abs=0.01) and "." in shown
            page.screenshot(path=str(tmp_path / f"{folder}.png"), full_page=True)
        browser.close()


def test_every_trained_model_has_a_card_that_names_its_metrics(small_tagger, tmp_path, capsys):
    card = read_card(small_tagger)
    assert card["library_name"] == "bistack" and card["kind"] == "tagger"
    header = (small_tagger / "README.md").read_text().split("---\n")[1]
    assert yaml.safe_load(header) == card
    with (small_tagger.parent / "metrics.csv").open() as handle:
        import csv

        rows = list(csv.DictReader(handle))
    best = max(rows, key=lambda r: float(r["dev_f1"]))
    assert card["metrics"]["dev_f1"] == pytest.approx(float(best["dev_f1"]), abs=1e-4)
    assert card["labels"] and "train" in card["data_files"]
    capsys.readouterr()
    assert main(["info", str(small_tagger), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "tagger" and info["dev_metrics"] == card["metrics"]
    assert info["parameters"] > 0 and info["card"] is True
    assert main(["info", str(small_tagger)]) == 0
    assert "dev: precision" in capsys.readouterr().out
    # A directory written before cards says what it can.
    old = Path(__file__).parents[1] / "fixtures" / "legacy_models" / "classifier"
    assert main(["info", str(old)]) == 0
    assert "dev: not recorded" in capsys.readouterr().out
    # An export carries its model's card.
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    exported = tmp_path / "onnx"
    done = subprocess.run([sys.executable, "-m", "bistack", "export", str(small_tagger),
                           "--output", str(exported)], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert read_card(exported) == card
