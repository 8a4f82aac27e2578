import pytest

from bistack.data.tables import parse_target, read_table
from bistack.errors import DataError


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


def test_reads_tsv_csv_and_jsonl(tmp_path):
    tsv = write(tmp_path, "a.tsv", "sentence\tlabel\na fine film\r\t1\nawful\t0\n")
    csv_file = write(
        tmp_path, "a.csv", 'id,excerpt,target\n1,"Two lines,\nquoted",0.5\n2,plain,-1\n'
    )
    jsonl = write(tmp_path, "a.jsonl", '{"text": "good", "y": 1}\n\n{"text": "bad", "y": 0}\n')
    assert [(e.text, e.labels) for e in read_table(tsv, "sentence", ["label"])] == [
        ("a fine film", ("1",)),
        ("awful", ("0",)),
    ]
    examples = read_table(csv_file, "excerpt", ["target"])
    assert examples[0].text == "Two lines,\nquoted"
    assert [e.row for e in examples] == [1, 2]
    assert [e.labels for e in read_table(jsonl, "text", ["y"])] == [("1",), ("0",)]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.tsv", "sentence\tlabel\ngood\t1\n", ": no column 'text' (columns: sentence, label)"),
        ("a.tsv", "text\tlabel\ngood\t1\n \t0\n", ": row 2: empty text in column 'text'"),
        ("a.tsv", "text\tlabel\ngood\t1\tx\n", ": row 1: 3 fields, the header has 2"),
        ("a.csv", "text,label\ngood,1,x\n", ": row 1: 3 fields, the header has 2"),
        (
            "a.jsonl",
            '{"text": "a", "label": 1}\n{"text": "b"}\n',
            ": row 2: no column 'label' (columns: text)",
        ),
        (
            "a.jsonl",
            '{"text": "a", "label": 1}\nnot json\n',
            ": row 2: not a JSON object (Expecting value)",
        ),
        ("a.tsv", "text\tlabel\n", ": no rows found: the file is empty or holds only a header"),
        (
            "a.txt",
            "text\tlabel\n",
            ": cannot tell the format from the extension; set data.format to tsv, csv, jsonl, "
            "parquet or datasets (a HuggingFace dataset folder)",
        ),
    ],
)
def test_bad_tables_name_the_file_and_row(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    with pytest.raises(DataError) as error:
        read_table(path, "text", ["label"])
    assert str(error.value) == f"{path}{message}"


def test_targets_must_be_finite_numbers():
    assert parse_target(" -1.5", "target", "t.csv", 3) == -1.5
    with pytest.raises(DataError) as error:
        parse_target("high", "target", "t.csv", 3)
    assert str(error.value) == "t.csv: row 3: target 'target' is not a number: 'high'"
    with pytest.raises(DataError) as error:
        parse_target("nan", "target", "t.csv", 4)
    assert str(error.value) == "t.csv: row 4: target 'target' is 'nan': it must be a finite number"
