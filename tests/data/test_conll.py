from pathlib import Path

import pytest

from bistack.data.conll import read_conll
from bistack.errors import DataError


def write(tmp_path: Path, text: str | bytes, name: str = "data.txt") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_reads_conll2003_columns_skips_docstart_and_splits_on_blank_lines(tmp_path):
    path = write(
        tmp_path,
        "-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP O\n \t \n"
        "Peter\tNNP\tI-NP\tI-PER\nBlackburn  NNP I-NP   I-PER\n\n\n",
    )
    sentences = read_conll(path)
    assert [s.tokens for s in sentences] == [["EU", "rejects"], ["Peter", "Blackburn"]]
    assert [s.tags for s in sentences] == [["I-ORG", "O"], ["I-PER", "I-PER"]]
    assert [s.line for s in sentences] == [3, 6]


def test_columns_are_selectable(tmp_path):
    path = write(tmp_path, "EU NNP I-NP I-ORG\nrejects VBZ I-VP O\n")
    sentences = read_conll(path, token_column=1, tag_column=2)
    assert sentences[0].tokens == ["NNP", "VBZ"]
    assert sentences[0].tags == ["I-NP", "I-VP"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "EU NNP I-NP I-ORG\nrejects VBZ O\n",
            ":2: expected 4 columns (as on line 1), found 3: 'rejects VBZ O'",
        ),
        (
            "EU NNP I-NP X-ORG\n",
            ":1: invalid tag 'X-ORG': expected 'O' or a prefix B-, I-, E-, S- and a type",
        ),
        (
            "EU I-ORG\nrejects\tO\nhim Q\n",
            ":3: invalid tag 'Q': expected 'O' or a prefix B-, I-, E-, S- and a type",
        ),
        (b"EU I-ORG\ncaf\xe9 O\n", ":2: not valid UTF-8 (byte 0xe9 at column 4)"),
        ("", ": no sentences found: the file is empty or holds only -DOCSTART- or comments"),
        (
            "-DOCSTART- -X- O O\n\n",
            ": no sentences found: the file is empty or holds only -DOCSTART- or comments",
        ),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(DataError) as error:
        read_conll(path)
    assert str(error.value) == f"{path}{message}"


def test_missing_file_and_missing_column(tmp_path):
    with pytest.raises(DataError, match=r"nope\.txt: no such file"):
        read_conll(tmp_path / "nope.txt")
    path = write(tmp_path, "EU I-ORG\n")
    with pytest.raises(DataError) as error:
        read_conll(path, tag_column=3)
    assert str(error.value) == f"{path}:1: tag column 3 does not exist: the line has 2"


@pytest.mark.parametrize(
    ("sentences", "problem"),
    [
        ([["I-PER", "O"], ["S-PER", "O"]], "this sentence is BIOES, the one on line 1 is IOB1"),
        ([["B-PER", "I-PER"], ["I-LOC"]], "this sentence is IOB1, the one on line 1 is BIO"),
        ([["B-PER", "E-PER"], ["B-LOC", "I-LOC"]], "this sentence is BIO, the one on line 1"),
    ],
)
def test_a_file_that_mixes_schemes_is_an_error_naming_the_line(tmp_path, sentences, problem):
    from bistack.data.conll import read_conll

    lines = []
    for tags in sentences:
        lines += [f"w{i} {tag}" for i, tag in enumerate(tags)] + [""]
    path = tmp_path / "mixed.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=problem):
        read_conll(path)


@pytest.mark.parametrize(
    "sentences",
    [
        [["I-PER", "B-PER"], ["O", "I-LOC"]],  # IOB1: B- only between two of one type
        [["B-PER", "I-PER"], ["B-LOC"]],  # BIO
        [["S-PER"], ["B-LOC", "E-LOC"]],  # BIOES
        [["O", "O"], ["I-PER"]],  # a sentence without entities fits any scheme
    ],
)
def test_a_file_in_one_scheme_reads(tmp_path, sentences):
    from bistack.data.conll import read_conll

    lines = []
    for tags in sentences:
        lines += [f"w{i} {tag}" for i, tag in enumerate(tags)] + [""]
    path = tmp_path / "one.txt"
    path.write_text("\n".join(lines) + "\n")
    assert len(read_conll(path)) == 2
