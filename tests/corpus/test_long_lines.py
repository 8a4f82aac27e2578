"""A very long input line is refused by its file and line, whatever the machine's load (a CPU
burner runs beside it), and leaves no empty output behind; the server refuses such a body as
too large. Tokenising never depends on the load: the copy of NLTK's tokenizers bistack loads
has no wall-clock limit (its ReDoS backstop, meant for patterns a caller supplies), and a
user's own NLTK keeps its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bistack.cli import main
from bistack.inputs import MAX_TEXT_CHARS


def long_line(megabytes: int) -> str:
    """A line of words with no sentence end: ``megabytes`` million characters."""
    words = "the cat sat on the mat and a nice film "
    return (words * (megabytes * 1_000_000 // len(words) + 1))[: megabytes * 1_000_000]


@pytest.fixture
def burner():
    """Another process keeping a core busy (for at most two minutes), as a loaded machine."""
    busy = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"
    process = subprocess.Popen([sys.executable, "-c", busy])
    yield
    process.kill()
    process.wait()


@pytest.mark.usefixtures("burner")
@pytest.mark.parametrize(("megabytes", "first"), [(10, True), (100, False), (100, True)])
def test_a_long_line_is_refused_by_file_and_line_and_leaves_no_empty_output(
    small_classifier, tmp_path, capsys, megabytes, first
):
    lines = (
        [long_line(megabytes), "a nice film"] if first else ["a nice film", long_line(megabytes)]
    )
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(lines) + "\n")
    output = tmp_path / "out.jsonl"
    argv = ["predict", str(small_classifier), "--input", str(source), "--output", str(output)]
    assert main(argv) == 2
    said = capsys.readouterr().err
    line = 1 if first else 2
    assert f"{source}:{line}:" in said and f"more than the {MAX_TEXT_CHARS:,}" in said
    assert "Traceback" not in said and "ReDoS" not in said
    if first:  # nothing written: no empty output, skipped-records file or progress record
        assert sorted(p.name for p in tmp_path.iterdir()) == ["texts.txt"]
    else:  # the records before it are kept, and --resume goes on after them
        assert len(output.read_text().splitlines()) == 1
    skipped = tmp_path / "skipped.jsonl"  # started again, as the message offers
    argv += ["--overwrite", "--on-error", "skip", "--skipped", str(skipped)]
    assert main(argv) == 0
    assert len(output.read_text().splitlines()) == 1
    [record] = [json.loads(x) for x in skipped.read_text().splitlines()]
    assert record["line"] == line and "one record may hold" in record["error"]


def test_our_tokenizers_have_no_wall_clock_limit_and_a_users_nltk_keeps_its_own():
    probe = (
        "import json, sys\n"
        "import nltk.redos\n"  # a user's own NLTK, imported before bistack tokenises
        "from bistack.data import tokenize\n"
        "tokenize.tokenize('Warm up .')\n"
        "pattern = type(tokenize._tokenizers()[1]).STARTING_QUOTES[0][0]\n"
        "print(json.dumps([nltk.redos.DEFAULT_TIMEOUT, pattern._resolve(pattern._timeout),\n"
        "                  sys.modules['nltk.redos'] is nltk.redos]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    users, ours, kept = json.loads(done.stdout)
    assert users == 5.0 and ours is None and kept


def test_the_server_refuses_a_long_text_as_too_large(small_classifier):
    pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
    from fastapi.testclient import TestClient

    from bistack.serve.app import create_app
    from bistack.serve.served import load_served

    with TestClient(create_app(load_served(small_classifier))) as client:
        answer = client.post("/predict", json={"texts": [long_line(10)]})
        assert answer.status_code == 413 and "Traceback" not in answer.text
        assert client.post("/predict", json={"texts": ["a nice film"]}).status_code == 200
