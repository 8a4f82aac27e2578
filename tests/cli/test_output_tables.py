"""A submission in one command: ``predict --output sub.csv`` writes a table pandas reads (the
id, then the label or each target's value, then each class's probability on request), chosen by
``--format`` or by the output's suffix; its head is written once, a resumed run adds rows
only. An ``--output`` whose suffix names a format the model does not write is refused before
anything is written, never filled with JSON lines under that name."""

from __future__ import annotations

import json

import pytest

from bistack.cli import main

pandas = pytest.importorskip("pandas", reason="the tables are read back as a user reads them")

TEXTS = ["a great film", "a dull plot", "", "lovely acting"]


def write_input(path, texts=TEXTS):
    pandas.DataFrame({"id": [f"r{i}" for i in range(len(texts))], "text": texts}).to_csv(
        path, index=False
    )
    return path


def test_a_classifier_s_submission_is_id_and_label_then_probabilities_on_request(
    small_classifier, tmp_path, capsys
):
    source = write_input(tmp_path / "test.csv")
    sub = tmp_path / "sub.csv"
    command = ["predict", str(small_classifier), "--input", str(source), "--id-field", "id"]
    assert main([*command, "--output", str(sub)]) == 0
    table = pandas.read_csv(sub, keep_default_na=False)
    assert list(table.columns) == ["id", "label"]
    assert list(table["id"]) == ["r0", "r1", "r2", "r3"]
    assert main([*command, "--format", "jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [str(r.get("label", "")) for r in records] == list(table["label"].astype(str))
    assert table["label"][2] == ""  # a blank text: an empty cell, the rows still aligned
    wide = tmp_path / "wide.tsv"
    assert main([*command, "--output", str(wide), "--probabilities"]) == 0
    table = pandas.read_csv(wide, sep="\t")
    labels = sorted(records[0]["probabilities"])
    assert list(table.columns) == ["id", "label", *(f"p_{label}" for label in labels)]
    got = table[[f"p_{label}" for label in labels]].to_numpy()[[0, 1, 3]]
    expected = [[r["probabilities"][k] for k in labels] for r in records if "label" in r]
    assert got.tolist() == expected  # every digit, as JSON lines give it


def test_a_regressor_s_submission_is_id_then_each_target(small_regressor, tmp_path):
    source = write_input(tmp_path / "test.csv")
    sub = tmp_path / "sub.csv"
    command = ["predict", str(small_regressor), "--input", str(source), "--id-field", "id"]
    assert main([*command, "--output", str(sub)]) == 0
    table = pandas.read_csv(sub)
    assert list(table.columns) == ["id", "score"]  # the training target's own name
    assert table["score"].notna().tolist() == [True, True, False, True]


def test_a_resumed_table_has_its_head_once(small_classifier, tmp_path, capsys):
    lines = [json.dumps({"id": f"r{i}", "text": t}) for i, t in enumerate(["a fine film"] * 3)]
    lines.insert(2, json.dumps({"id": "bad", "text": 5}))  # stops the first run there
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    sub = tmp_path / "sub.csv"
    command = ["predict", str(small_classifier), "--input", str(source), "--id-field", "id"]
    command += ["--output", str(sub), "--chunk-size", "1"]
    assert main(command) != 0
    assert sub.read_text().splitlines()[0] == "id,label"
    skipped = tmp_path / "skipped.jsonl"
    assert main([*command, "--resume", "--on-error", "skip", "--skipped", str(skipped)]) == 0
    capsys.readouterr()
    table = pandas.read_csv(sub)
    assert list(table["id"]) == ["r0", "r1", "r2"]  # the head once, each row once
    assert json.loads(skipped.read_text())["id"] == "bad"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--format", "csv", "--attention"], "--attention is not carried by --format csv"),
        (["--probabilities"], "--probabilities is not carried by --format jsonl"),
    ],
)
def test_an_option_a_format_cannot_carry_is_refused(small_classifier, flags, said, capsys):
    assert main(["predict", str(small_classifier), "a fine film", *flags]) == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("name", ["sub.parquet", "sub.json", "sub.conll"])
def test_a_suffix_naming_a_format_the_model_does_not_write_is_refused(
    small_classifier, tmp_path, capsys, name
):
    output = tmp_path / name
    assert main(["predict", str(small_classifier), "a fine film", "--output", str(output)]) == 2
    said = capsys.readouterr().err
    assert f"--output {output}: its suffix names" in said and "it writes jsonl, csv, tsv" in said
    assert not output.exists()


def test_a_taggers_table_is_a_row_an_entity_with_character_offsets(small_tagger, tmp_path, capsys):
    """A tagger's sub.csv: id (or row), start and end as character offsets (end exclusive),
    type, text and confidence, one row an entity; a text without any has one row with an
    empty type, so that every record is there."""
    texts = ["Anna left Paris yesterday .", "nothing at all", 'John, "Mary" visited Rome']
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n"
                              for i, t in enumerate(texts)))  # fmt: skip
    sub = tmp_path / "tags.csv"
    command = ["predict", str(small_tagger), "--input", str(source), "--id-field", "id"]
    assert main([*command, "--output", str(sub)]) == 0
    table = pandas.read_csv(sub, dtype={"type": str}, keep_default_na=False)
    assert list(table.columns) == ["id", "start", "end", "type", "text", "confidence"]
    assert main([*command, "--format", "jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = []
    for record in records:
        entities = record["entities"] or [None]
        for entity in entities:
            if entity is None:
                expected.append((record["id"], ""))
            else:
                assert record["text"][entity["start"] : entity["end"]] == entity["text"]
                expected.append((record["id"], entity["type"]))
    assert list(zip(table["id"], table["type"], strict=True)) == expected
    assert set(table["id"]) == {"d0", "d1", "d2"} and any(table["type"])
    for row in table.itertuples():
        if row.type:
            assert texts[int(row.id[1:])][int(row.start) : int(row.end)] == row.text
    tsv = tmp_path / "tags.tsv"
    assert main([*command, "--output", str(tsv)]) == 0
    assert len(pandas.read_csv(tsv, sep="\t")) == len(table)


def test_a_suffix_naming_no_format_is_refused_unless_the_format_is_given(
    small_classifier, tmp_path, capsys
):
    command = ["predict", str(small_classifier), "a fine film", "--output"]
    for name in ("out.weird", "out"):
        output = tmp_path / name
        assert main([*command, str(output)]) == 2
        said = capsys.readouterr().err
        assert "names no format; this model writes jsonl (.jsonl, .ndjson), csv (.csv)" in said
        assert not output.exists()
    assert main([*command, str(tmp_path / "out.weird"), "--format", "jsonl"]) == 0
    assert "label" in json.loads((tmp_path / "out.weird").read_text().splitlines()[0])
    assert main([*command, str(tmp_path / "out.jsonl"), "--format", "csv"]) == 2
    said = capsys.readouterr().err
    assert "--format csv and --output" in said and "whose suffix names jsonl" in said
    assert not (tmp_path / "out.jsonl").exists()


def test_a_model_trained_with_ids_writes_them_and_a_table_without_ids_its_rows(tmp_path, capsys):
    """A submission in one command: the model's data.id_column is the id column of a table
    when the input has it; without any id the first column is each record's row."""
    from bistack import tasks
    from tests.conftest import train_quietly
    from tests.text_models.test_end_to_end import sentiment_rows, text_config

    rows = sentiment_rows(40, 0)
    train = tmp_path / "train.csv"
    pandas.DataFrame(
        {"id": [f"x{i:03d}" for i in range(len(rows))], "sentence": [t for t, _ in rows],
         "score": [float(label) for _, label in rows]}
    ).to_csv(train, index=False)  # fmt: skip
    config = text_config(train, train, kind="regressor", train={"max_epochs": 1})
    config["data"] |= {"label_columns": ["score"], "id_column": "id"}
    model = train_quietly(tasks.config_from_dict(config), tmp_path / "run")
    test = write_input(tmp_path / "test.csv")
    sub = tmp_path / "sub.csv"
    command = ["predict", str(model), "--input", str(test), "--text-field", "text"]
    assert main([*command, "--output", str(sub)]) == 0
    assert "ids from the input's column 'id'" in capsys.readouterr().err
    table = pandas.read_csv(sub, keep_default_na=False)
    assert list(table.columns) == ["id", "score"] and list(table["id"]) == ["r0", "r1", "r2", "r3"]
    bare = tmp_path / "bare.csv"
    pandas.read_csv(test).drop(columns="id").to_csv(bare, index=False)
    command[3] = str(bare)
    assert main([*command, "--output", str(tmp_path / "rows.csv")]) == 0
    said = capsys.readouterr().err
    assert "first column is row" in said and "no column 'id', the model's data.id_column" in said
    table = pandas.read_csv(tmp_path / "rows.csv")
    assert list(table.columns) == ["row", "score"] and list(table["row"]) == [1, 2, 3, 4]
    assert main(["predict", str(model), "a", "b", "--output", str(tmp_path / "args.csv")]) == 0
    assert list(pandas.read_csv(tmp_path / "args.csv")["row"]) == [1, 2]


AWKWARD_IDS = ["a,b", 'say "hi"', "cr\ronly", "line\nbreak", "both\r\n", "tab\there",
               "sep\u2028arated", "", "plain", " spaced ", "007"]  # fmt: skip


@pytest.mark.parametrize("delimiter", [",", "\t"])
def test_every_table_line_round_trips_whatever_its_cells_hold(delimiter):
    import csv
    import io

    from bistack.files.formats import table_line

    rows = [["id", "value"], *([cell, f"{i}.5"] for i, cell in enumerate(AWKWARD_IDS))]
    text = "".join(table_line(row, delimiter) for row in rows)
    read = pandas.read_csv(io.StringIO(text), sep=delimiter, dtype=str, keep_default_na=False)
    assert list(read["id"]) == AWKWARD_IDS and len(read) == len(AWKWARD_IDS)
    assert list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)) == rows
    plain = io.StringIO()  # a row without such characters keeps csv.writer's bytes
    csv.writer(plain, delimiter=delimiter, lineterminator="\n").writerow(["plain", 1.25, "x y"])
    assert table_line(["plain", 1.25, "x y"], delimiter) == plain.getvalue()


def test_ids_holding_line_breaks_and_quotes_keep_their_rows(small_classifier, tmp_path):
    records = [{"id": name, "text": "a fine film"} for name in AWKWARD_IDS]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    for suffix, sep in ((".csv", ","), (".tsv", "\t")):
        sub = tmp_path / f"sub{suffix}"
        command = ["predict", str(small_classifier), "--input", str(source), "--id-field", "id"]
        assert main([*command, "--output", str(sub)]) == 0
        table = pandas.read_csv(sub, sep=sep, dtype=str, keep_default_na=False)
        assert list(table["id"]) == AWKWARD_IDS


def test_a_submission_reads_the_models_text_and_id_columns_as_it_trained(tmp_path, capsys):
    """A CommonLit-shaped test file (``id,excerpt``) into ``id,target`` with no field named:
    the texts from the model's data.text_column, the ids from its data.id_column."""
    from bistack import tasks
    from tests.conftest import train_quietly
    from tests.text_models.test_end_to_end import sentiment_rows, text_config

    rows = sentiment_rows(40, 0)
    train = tmp_path / "train.csv"
    pandas.DataFrame(
        {"id": [f"x{i:03d}" for i in range(len(rows))], "excerpt": [t for t, _ in rows],
         "target": [float(label) for _, label in rows]}
    ).to_csv(train, index=False)  # fmt: skip
    config = text_config(train, train, kind="regressor", train={"max_epochs": 1})
    config["data"] |= {"text_column": "excerpt", "label_columns": ["target"], "id_column": "id"}
    model = train_quietly(tasks.config_from_dict(config), tmp_path / "run")
    test = tmp_path / "test.csv"
    pandas.DataFrame({"id": ["a1", "b2"], "excerpt": ["good film", "bad film"]}).to_csv(
        test, index=False
    )
    sub = tmp_path / "sub.csv"
    assert main(["predict", str(model), "--input", str(test), "--output", str(sub)]) == 0
    said = capsys.readouterr().err
    assert "texts from the input's column 'excerpt'" in said and "column 'id'" in said
    table = pandas.read_csv(sub)
    assert list(table.columns) == ["id", "target"] and list(table["id"]) == ["a1", "b2"]
    # A field named on the command line is the one read, the model's never replacing it.
    assert main(["predict", str(model), "--input", str(test), "--text-field", "body",
                 "--output", str(tmp_path / "other.csv")]) == 2  # fmt: skip
    assert "'body'" in capsys.readouterr().err
