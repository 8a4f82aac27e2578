"""Corpus prediction as a user runs it: every input format gives the predictions the texts give
alone, in input order; bad records are named by line or row, and stop the run or are listed;
workers give the same bytes as one process; a pipe sees output before its end; memory does not
grow with the input; and a run killed at random points resumes to the very bytes of a run that
was never stopped."""

from __future__ import annotations

import csv
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bistack.cli import main
from tests.conftest import with_ctrl_c
from tests.warm_commands import warm_bistack

FRESH_BISTACK = [sys.executable, "-m", "bistack"]  # where its memory or a kill is the point
TEXTS = ["Anna visited Paris yesterday .", "", "Peter left New York", "Mary saw Rome ."]


def predicted(capsys, *args: str, placed: bool = False) -> list[dict]:
    """The records ``bistack predict`` prints; without ``placed``, less the line or row every
    record of an --input carries (so they compare with predictions of the texts alone)."""
    capsys.readouterr()
    assert main(["predict", *args]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    if placed:
        return records
    return [{k: v for k, v in r.items() if k not in ("line", "row")} for r in records]


def by_argument(capsys, model: Path, texts: list[str]) -> list[dict]:
    return predicted(capsys, str(model), *texts, "--format", "jsonl")


def test_every_input_format_predicts_what_the_texts_alone_predict(small_tagger, tmp_path, capsys):
    expected = by_argument(capsys, small_tagger, TEXTS)
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(TEXTS) + "\n")
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    for suffix, delimiter in ((".csv", ","), (".tsv", "\t")):
        with (tmp_path / f"in{suffix}").open("w", newline="") as handle:
            writer = csv.writer(handle, delimiter=delimiter)
            writer.writerow(["id", "body"])
            writer.writerows(enumerate(TEXTS))
    pq = pytest.importorskip("pyarrow.parquet", reason="Parquet needs pyarrow")
    import pyarrow as pa

    pq.write_table(pa.table({"body": TEXTS}), tmp_path / "in.parquet", row_group_size=2)
    model = str(small_tagger)
    assert predicted(capsys, model, "--input", str(lines), "--format", "jsonl") == expected
    assert predicted(capsys, model, "--input", str(jsonl), "--format", "jsonl") == expected
    for name in ("in.csv", "in.tsv", "in.parquet"):
        got = predicted(capsys, model, "--input", str(tmp_path / name), "--text-field", "body",
                        "--format", "jsonl")  # fmt: skip
        assert got == expected, name


def test_pretokenised_sentences_get_one_tag_per_given_token(small_tagger, tmp_path, capsys):
    sentences = [["Anna", "visited", "New", "York", "yesterday", "."], ["Peter", "left", "Rome"]]
    tokenized = tmp_path / "in.txt"
    tokenized.write_text("".join(" ".join(s) + "\n" for s in sentences))
    conll = tmp_path / "in.conll"
    conll.write_text("-DOCSTART- -X- O O\n\n" + "\n\n".join(
        "\n".join(f"{token} NNP I-NP O" for token in s) for s in sentences) + "\n")  # fmt: skip
    records = predicted(capsys, str(small_tagger), "--input", str(tokenized), "--tokenized",
                        "--format", "jsonl")  # fmt: skip
    assert [[t["text"] for t in r["tokens"]] for r in records] == sentences
    for record in records:  # offsets index the tokens joined by spaces
        for token in record["tokens"]:
            assert record["text"][token["start"] : token["end"]] == token["text"]
    assert [e["text"] for e in records[0]["entities"]] == ["Anna", "New York"]
    assert predicted(capsys, str(small_tagger), "--input", str(conll), "--format", "jsonl") == (
        records
    )
    capsys.readouterr()
    assert main(["predict", str(small_tagger), "--input", str(conll), "--format", "conll"]) == 0
    blocks = capsys.readouterr().out.strip("\n").split("\n\n")
    assert [[line.split("\t")[0] for line in b.splitlines()] for b in blocks] == sentences


def test_a_text_model_refuses_token_input_with_a_reason(small_classifier, tmp_path, capsys):
    path = tmp_path / "in.conll"
    path.write_text("good O\nfilm O\n")
    assert main(["predict", str(small_classifier), "--input", str(path)]) == 2
    assert "conll input gives tokens, which only a tagger takes" in capsys.readouterr().err


BAD_JSONL = [
    '{"text": "Anna visited Paris"}',
    "{not json",
    '{"body": "no text field"}',
    '{"text": 12}',
    "[1, 2]",
    '{"text": "Peter left Rome"}',
]


def test_a_bad_record_stops_the_run_after_the_ones_before_it(small_tagger, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(BAD_JSONL) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["predict", str(small_tagger), "--input", str(source), "--output", str(out),
                 "--format", "jsonl"]) == 2  # fmt: skip
    assert f"{source}:2: not JSON" in capsys.readouterr().err
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == [
        "Anna visited Paris"
    ]


def test_skipped_records_are_listed_with_their_line_never_dropped(small_tagger, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(BAD_JSONL) + "\n")
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    assert main(["predict", str(small_tagger), "--input", str(source), "--output", str(out),
                 "--format", "jsonl", "--on-error", "skip"]) == 0  # fmt: skip
    assert "predicted 2 records" in capsys.readouterr().err
    texts = [json.loads(line)["text"] for line in out.read_text().splitlines()]
    assert texts == ["Anna visited Paris", "Peter left Rome"]
    skipped = [json.loads(line) for line in Path(f"{out}.skipped.jsonl").read_text().splitlines()]
    assert [s["line"] for s in skipped] == [2, 3, 4, 5]
    assert "not JSON" in skipped[0]["error"]
    assert "no field 'text'" in skipped[1]["error"] and "'body'" in skipped[1]["error"]
    assert "int, not a text" in skipped[2]["error"]
    assert "expected a JSON object" in skipped[3]["error"]
    assert not Path(f"{out}.progress.json").exists()


def test_table_rows_that_cannot_be_read_are_named_by_row(small_classifier, tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_bytes(b"id,text\n1,a great film\n2,too,many\n3,a dull \xff film\n4,lovely\n")
    skipped = tmp_path / "skipped.jsonl"
    records = predicted(capsys, str(small_classifier), "--input", str(source), "--on-error",
                        "skip", "--skipped", str(skipped))  # fmt: skip
    assert [r["text"] for r in records] == ["a great film", "lovely"]
    listed = [json.loads(line) for line in skipped.read_text().splitlines()]
    assert [(s["row"], s["line"]) for s in listed] == [(2, 3), (3, 4)]
    assert "3 cells, the header has 2" in listed[0]["error"]
    assert "not valid UTF-8" in listed[1]["error"]
    assert main(["predict", str(small_classifier), "--input", str(source)]) == 2
    assert f"{source}:3: row 2: 3 cells, the header has 2" in capsys.readouterr().err


def test_skipping_to_stdout_needs_a_file_for_the_skipped(small_tagger, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("Anna\n")
    assert main(["predict", str(small_tagger), "--input", str(source), "--on-error", "skip"]) == 2
    assert "give --skipped PATH" in capsys.readouterr().err


def test_an_output_is_never_replaced_unasked(small_tagger, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("Anna left Paris\n")
    out = tmp_path / "out.conll"
    out.write_text("precious\n")
    assert main(["predict", str(small_tagger), "--input", str(source), "--output", str(out)]) == 2
    assert "add --overwrite" in capsys.readouterr().err and out.read_text() == "precious\n"
    assert main(["predict", str(small_tagger), "--input", str(source), "--output", str(out),
                 "--resume"]) == 2  # fmt: skip
    assert "no unfinished run to continue" in capsys.readouterr().err
    assert out.read_text() == "precious\n"


def corpus(path: Path, count: int, seed: int = 0) -> Path:
    """``count`` lines of short and long texts (some blank), for the process-level tests."""
    rng = random.Random(seed)
    words = ["Anna", "Peter", "visited", "left", "Paris", "New", "York", "Rome", "yesterday", "."]
    with path.open("w") as handle:
        for _ in range(count):
            handle.write(" ".join(rng.choices(words, k=rng.choice([0, 3, 6, 12, 40]))) + "\n")
    return path


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*warm_bistack(), "predict", *args], capture_output=True, timeout=300, **kwargs
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    return done


def without_confidences(output: bytes) -> list[dict]:
    """The records with their confidences apart, rounded: one thread or two, another batch, sum
    floats in another order."""
    records = [json.loads(line) for line in output.splitlines()]
    for record in records:
        for part in record["tokens"] + record["entities"]:
            part["confidence"] = round(part["confidence"], 4)
    return records


@pytest.mark.slow
def test_two_workers_predict_what_one_process_predicts_in_order(small_tagger, tmp_path):
    source = corpus(tmp_path / "in.txt", 3000)
    args = [str(small_tagger), "--input", str(source), "--format", "jsonl", "--chunk-size", "100"]
    one = run(*args).stdout
    two = run(*args, "--workers", "2").stdout
    assert one.count(b"\n") == 3000
    assert without_confidences(two) == without_confidences(one)


def test_a_pipe_sees_each_prediction_before_its_input_ends(small_tagger):
    process = subprocess.Popen(
        [*warm_bistack(), "predict", str(small_tagger), "--input", "-", "--format", "jsonl"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        for text in ("Anna visited Paris", "Peter left Rome"):
            process.stdin.write(text.encode() + b"\n")
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], 60)
            assert ready, "no output within 60 s while the pipe stays open"
            assert json.loads(process.stdout.readline())["text"] == text
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    assert process.returncode == 0


def test_off_a_terminal_progress_is_a_line_at_most_every_few_seconds(small_tagger, tmp_path):
    source = corpus(tmp_path / "in.txt", 400)
    done = run(str(small_tagger), "--input", str(source), "--output", str(tmp_path / "o.conll"),
               "--chunk-size", "50", "--log-every", "0")  # fmt: skip
    said, *lines = done.stderr.decode().splitlines()
    assert said == f"reading {source} as one text a line; --input-format conll reads CoNLL columns"
    assert lines[0].startswith("predicted 50 records so far (") and lines[0].endswith("/s)")
    assert lines[-1].startswith("predicted 400 records into")
    quiet = run(str(small_tagger), "--input", str(source), "--output", str(tmp_path / "p.conll"),
                "--chunk-size", "50")  # fmt: skip
    assert len(quiet.stderr.decode().splitlines()) == 2  # how it reads, and the summary


def peak_rss_mb(args: list[str]) -> float:
    """The peak resident memory of one ``bistack predict`` process, in MiB."""
    process = subprocess.Popen([*FRESH_BISTACK, "predict", *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_maxrss / 1024


@pytest.mark.slow
def test_memory_does_not_grow_with_the_input(small_tagger, tmp_path):
    rss = {}
    for count in (2_000, 30_000):
        source = corpus(tmp_path / f"in-{count}.txt", count)
        rss[count] = peak_rss_mb([str(small_tagger), "--input", str(source), "--format", "jsonl",
                                  "--chunk-size", "256"])  # fmt: skip
    # 15x the input: holding it all (texts, predictions, 50 MB of output) would cost far more.
    assert rss[30_000] - rss[2_000] < 10, rss


@pytest.mark.slow
def test_a_run_killed_at_random_points_resumes_to_the_same_bytes(small_tagger, tmp_path):
    source = corpus(tmp_path / "in.txt", 6000, seed=1)
    args = [str(small_tagger), "--input", str(source), "--format", "jsonl", "--chunk-size", "64"]
    whole = run(*args).stdout
    out = tmp_path / "out.jsonl"
    rng = random.Random(0)
    kills = 0
    extra = ["--output", str(out)]
    progress = Path(f"{out}.progress.json")
    for _ in range(10):
        before = out.stat().st_size if out.exists() else 0
        process = subprocess.Popen(
            [*FRESH_BISTACK, "predict", *args, *extra], stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60  # kill once this run has written something of its own,
        while process.poll() is None and time.monotonic() < deadline:  # at a random point after
            if out.exists() and out.stat().st_size > before:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.3))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait()
        assert process.returncode in (0, -signal.SIGKILL), process.stderr.read()
        done = out.read_bytes() if out.exists() else b""  # killed while loading the model
        assert whole.startswith(done[: done.rfind(b"\n") + 1])  # whole records, in order
        extra = ["--output", str(out), "--resume"]
        if out.exists() and not progress.exists():
            break  # finished (the output has no progress record left), perhaps killed on exit
    else:
        run(*args, *extra)
    assert kills >= 3, f"the run ended before it was killed often enough ({kills} kills)"
    assert out.read_bytes() == whole
    assert not progress.exists()


def test_predictions_join_back_by_their_place_and_id(small_classifier, tmp_path, capsys):
    """Each prediction of an --input carries its line or row, and with --id-field the record's
    own id; skipped records keep theirs in the skipped file."""
    pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra")
    import pandas as pd

    rows = [{"doc": "a7", "text": "a great film"}, {"doc": "b2", "text": 5},
            {"doc": "c9", "text": "a dull film"}]  # fmt: skip
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv_file = tmp_path / "in.csv"
    csv_file.write_text("doc,text\na7,a great film\nb2,\nc9,a dull film\n")
    parquet = tmp_path / "in.parquet"
    pd.DataFrame([r | {"text": str(r["text"])} for r in rows]).to_parquet(parquet)
    model = str(small_classifier)
    for source, place in ((jsonl, "line"), (csv_file, "row"), (parquet, "row")):
        out, skipped = tmp_path / f"{source.name}.out.jsonl", tmp_path / f"{source.name}.skipped"
        argv = ["predict", model, "--input", str(source), "--id-field", "doc", "--output",
                str(out), "--skipped", str(skipped), "--on-error", "skip"]  # fmt: skip
        assert main(argv) == 0
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert records[0]["doc"] == "a7" and records[-1]["doc"] == "c9", source
        assert records[0][place] == 1 and records[-1][place] == 3
        assert records[0]["text"] == "a great film"
        if skipped.exists():  # the JSON number, and the blank CSV cell (which predicts no label)
            [refused] = [json.loads(line) for line in skipped.read_text().splitlines()]
            assert refused["doc"] == "b2" and refused[place] == 2
    capsys.readouterr()
    assert main(["predict", model, "--input", str(tmp_path / "in.csv"), "--id-field", "id"]) == 2
    assert "no column 'id'" in capsys.readouterr().err
    lines = tmp_path / "in.txt"
    lines.write_text("a great film\n")
    assert main(["predict", model, "--input", str(lines), "--id-field", "doc"]) == 2
    assert "lines input has no fields" in capsys.readouterr().err
    assert main(["predict", model, "--input", str(jsonl), "--id-field", "text"]) == 2
    assert "the prediction has a field of that name too" in capsys.readouterr().err


def test_a_file_inputs_progress_counts_its_records_first(tmp_path):
    from bistack.corpus.sources import count_records

    path = tmp_path / "in.txt"
    path.write_text("a\nb\nc")  # no newline at the end: still 3
    assert count_records(str(path), "lines") == 3
    table = tmp_path / "in.csv"
    table.write_text("text\na\nb\n")
    assert count_records(str(table), "csv") == 2
    assert count_records("-", "lines") is None


def test_a_txt_of_conll_columns_is_read_as_conll_and_says_so(small_tagger, tmp_path, capsys):
    """What ``train`` and ``evaluate`` read as CoNLL, ``predict --input`` reads so too: one
    record a sentence, not one a column line; a .txt of texts stays one text a line."""
    from tests.conftest import tiny_sentences, write_conll

    sentences = tiny_sentences(7, seed=3)
    for docstart in (True, False):
        data = write_conll(tmp_path / f"dev{docstart}.txt", sentences, docstart=docstart)
        assert main(["predict", str(small_tagger), "--input", str(data), "--format", "jsonl"]) == 0
        captured = capsys.readouterr()
        records = [json.loads(line) for line in captured.out.splitlines()]
        tokens = [[token["text"] for token in r["tokens"]] for r in records]
        assert tokens == [[t for t, _ in s] for s in sentences]
        assert "as CoNLL columns" in captured.err and "--input-format lines" in captured.err
    texts = tmp_path / "texts.txt"
    texts.write_text("John lives in Paris .\nMary works in Berlin .\n")
    assert main(["predict", str(small_tagger), "--input", str(texts), "--format", "jsonl"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert captured.err.splitlines() == [
        f"reading {texts} as one text a line; --input-format conll reads CoNLL columns"
    ]


@pytest.mark.parametrize(
    ("lines", "bad", "failing"),
    [
        # a header line has the columns' width: read as CoNLL, it is a token line like any
        (["token tag", "John B-PER", "lives O", "", "Paris B-LOC", ""], 1, []),
        (["John B-PER", "lives O", "", "Mary went home .", "", "Paris B-LOC", ""], 4, [4]),
    ],
    ids=["header", "a line of text"],
)
def test_a_file_of_conll_columns_with_a_line_that_is_not_is_an_error_naming_it(
    small_tagger, tmp_path, capsys, lines, bad, failing
):
    """Neither reading of such a file is right, so neither is guessed: the line is named, and
    --input-format says how to read it (CoNLL columns: that line fails alone)."""
    path = tmp_path / "mixed.txt"
    path.write_text("\n".join(lines) + "\n")
    assert main(["predict", str(small_tagger), "--input", str(path)]) == 2
    error = capsys.readouterr().err
    assert f"{path}:{bad}: " in error and "is not CoNLL columns" in error
    assert "--input-format conll" in error and error.count("\n") == 1
    argv = ["predict", str(small_tagger), "--input", str(path), "--input-format", "conll"]
    assert (
        main([*argv, "--format", "jsonl", "--on-error", "skip", "--skipped", str(tmp_path / "s")])
        == 0
    )
    skipped = [json.loads(line) for line in (tmp_path / "s").read_text().splitlines()]
    assert [s["line"] for s in skipped] == failing
    assert all("expected 2 columns (as on line 1), found 4" in s["error"] for s in skipped)


def test_an_option_its_format_cannot_carry_is_a_usage_error(small_tagger, capsys):
    assert main(["predict", str(small_tagger), "John lives here", "--top-k", "2"]) == 2
    error = capsys.readouterr().err
    assert "--top-k is not carried by --format conll; use --format jsonl" in error
    argv = ["predict", str(small_tagger), "John lives here", "--top-k", "2", "--format", "jsonl"]
    assert main(argv) == 0
    [alternatives] = json.loads(capsys.readouterr().out)["alternatives"]  # one sentence
    assert len(alternatives) == 2


def test_an_entity_left_out_by_min_confidence_leaves_its_tokens_outside(small_tagger, capsys):
    """Every format agrees on what ``--min-confidence`` kept: a dropped entity's tokens are
    tagged O in the tags, in CoNLL and in the entities alike."""
    text = "John Smith visited Paris and Berlin ."
    assert main(["predict", str(small_tagger), text, "--format", "jsonl"]) == 0
    record = json.loads(capsys.readouterr().out)
    confidences = sorted(e["confidence"] for e in record["entities"])
    assert confidences, "the tagger found no entity to leave out"
    threshold = confidences[-1] + 1e-9 if len(confidences) == 1 else confidences[-1]
    argv = ["predict", str(small_tagger), text, "--min-confidence", str(threshold)]
    assert main([*argv, "--format", "jsonl"]) == 0
    kept = json.loads(capsys.readouterr().out)
    spans = {(e["start"], e["end"]) for e in kept["entities"]}
    assert len(kept["entities"]) < len(record["entities"])
    tagged = [token["tag"] for token in kept["tokens"]]
    assert tagged.count("O") > [token["tag"] for token in record["tokens"]].count("O")
    assert main(argv) == 0  # CoNLL: the same tags
    columns = [line.split("\t") for line in capsys.readouterr().out.splitlines() if line]
    assert [tag for _, tag in columns] == tagged
    for token in kept["tokens"]:  # a tag outside O lies in a kept entity
        inside = any(start <= token["start"] < end for start, end in spans)
        assert token["tag"] == "O" or inside


def test_an_output_file_is_written_in_the_format_its_suffix_names(small_tagger, tmp_path):
    """``--output runs/gpu.jsonl`` (the GPU recipe's) gets JSON lines from a tagger, whose
    default is CoNLL; --format still decides where given."""
    from bistack.cli import main

    texts = tmp_path / "texts.txt"
    texts.write_text("John lives in Paris .\nMary left .\n")
    out = tmp_path / "tags.jsonl"
    assert main(["predict", str(small_tagger), "--input", str(texts), "--output", str(out)]) == 0
    assert [json.loads(line)["line"] for line in out.read_text().splitlines()] == [1, 2]
    conll = tmp_path / "tags.jsonl.txt"
    argv = ["predict", str(small_tagger), "--input", str(texts), "--output", str(conll)]
    assert main([*argv, "--format", "conll"]) == 0
    assert conll.read_text().count("\n\n") == 2


@pytest.mark.slow
def test_a_replacing_run_killed_midway_leaves_the_old_output_whole(small_tagger, tmp_path):
    """--overwrite writes beside the old output and renames over it at the end: a kill leaves
    the old file byte for byte, and --resume finishes the new one in its place."""
    source = corpus(tmp_path / "in.txt", 4000, seed=2)
    args = [str(small_tagger), "--input", str(source), "--format", "jsonl", "--chunk-size", "64"]
    whole = run(*args).stdout
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"an": "older output"}\n')
    hidden = tmp_path / ".out.jsonl.bistack-new"
    process = subprocess.Popen(
        [*FRESH_BISTACK, "predict", *args, "--output", str(out), "--overwrite"],
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if hidden.exists() and hidden.stat().st_size > 0:
            break
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert out.read_bytes() == b'{"an": "older output"}\n'
    assert whole.startswith(hidden.read_bytes().rsplit(b"\n", 1)[0])
    run(*args, "--output", str(out), "--resume")
    assert out.read_bytes() == whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"]


def reading_stdin(pid: int) -> bool:
    """Whether a thread of process ``pid`` is blocked reading its standard input (the
    kernel's view: the read system call, x86-64's 0 or arm64's 63, on descriptor 0)."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            fields = (task / "syscall").read_text().split()
        except OSError:
            continue
        if len(fields) > 1 and fields[0] in ("0", "63") and int(fields[1], 16) == 0:
            return True
    return False


def test_ctrl_c_while_waiting_for_the_first_record_ends_like_every_command(small_tagger):
    """A pipe that has said nothing yet: Ctrl-C prints what was done and exits 130, with no
    abort at the interpreter's shutdown (the reader thread blocked in stdin's buffer)."""
    read, write = os.pipe()
    process = subprocess.Popen(
        [*FRESH_BISTACK, "predict", str(small_tagger), "--input", "-"],
        stdin=read,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=with_ctrl_c,
    )
    os.close(read)
    try:
        deadline = time.monotonic() + 120
        while not reading_stdin(process.pid) and time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        os.close(write)
    assert process.returncode == 130, err.decode()
    assert b"interrupted: 0 records predicted" in err and b"Fatal Python error" not in err
