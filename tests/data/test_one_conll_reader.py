"""One CoNLL reader and one CoNLL-U reader: training, evaluation and ``predict --input`` read
the same file into the same sentences (tweets whose sentences start with a ``#hashtag`` token,
comments, blank-line variants; CoNLL-U's multiword tokens, empty nodes, documents) or refuse it
naming the same line, so that a file means one thing to each."""

from __future__ import annotations

import json

import pytest

from bistack.cli import main
from bistack.data.conll import read_conll
from bistack.data.tagged import read_tagged
from bistack.taggers.config import TaggerConfig

TWEETS = """-DOCSTART- -X- O

# sent_id = 1
#hashtag O
Paris B-LOC
rocks O


@user O
#win O

# text = one more
# O
Berlin B-LOC
  \t
#MondayMotivation O
"""
FILES = {
    "tweets": TWEETS,
    "windows line ends": TWEETS.replace("\n", "\r\n"),
    "no blank line at the end, runs of blank lines": TWEETS.rstrip("\n").replace("\n\n", "\n\n\n"),
    "a comment first, no -DOCSTART-": "# newdoc id = a\n#tag O\nx O\n\n#y O\n",
}
EXPECTED = {
    "tweets": [
        ["#hashtag", "Paris", "rocks"],
        ["@user", "#win"],
        ["#", "Berlin"],
        ["#MondayMotivation"],
    ],
    "a comment first, no -DOCSTART-": [["#tag", "x"], ["#y"]],
}


@pytest.mark.parametrize("name", list(FILES))
def test_training_evaluation_and_prediction_read_the_same_sentences(
    name, tmp_path, small_tagger, capsys
):
    path = tmp_path / "data.txt"
    path.write_bytes(FILES[name].encode())
    expected = EXPECTED.get(name, EXPECTED["tweets"])
    trained = [s.tokens for s in read_tagged(path, TaggerConfig().data)]  # train's reader
    assert trained == expected
    assert [s.tokens for s in read_conll(path)] == expected  # evaluate's, through read_tagged
    capsys.readouterr()
    assert main(["evaluate", str(small_tagger), str(path), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["gold_entities"] == sum("Paris" in t or "Berlin" in t for t in expected)
    assert (scores["token_accuracy"] * sum(map(len, expected)) / 100).is_integer()
    assert main(["predict", str(small_tagger), "--input", str(path), "--format", "jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [[t["text"] for t in r["tokens"]] for r in records] == expected


def test_a_hash_line_of_another_shape_is_a_comment_and_a_tag_is_checked(tmp_path):
    from bistack.errors import DataError

    path = tmp_path / "four.txt"
    path.write_text("# sent_id = 1\nEU NNP B-NP B-ORG\n\n#x NN I-NP O\n")
    assert [s.tokens for s in read_conll(path)] == [["EU"], ["#x"]]
    path.write_text("EU NNP B-NP B-ORG\n\n#x NN I-NP Q\n")  # "#x" line of 4 columns, no tag
    assert [s.tokens for s in read_conll(path)] == [["EU"]]
    path.write_text("EU NNP B-NP B-ORG\nrejects NN I-NP Q\n")
    with pytest.raises(DataError, match=r"four.txt:2: invalid tag .Q."):
        read_conll(path)


def word(number: str, form: str, tag: str) -> str:
    return "\t".join([number, form, "_", tag, "_", "_", "0", "_", "_", "_"])


CONLLU = {  # the entity tag in UPOS: what a tagger's data.tag_field reads by default
    "ten columns, comments, a multiword token, an empty node, documents": "\n".join(
        [
            "# newdoc id = a",
            "# text = Paris don't",
            word("1", "Paris", "B-LOC"),
            word("2-3", "don't", "_"),
            word("2", "do", "O"),
            word("3", "not", "O"),
            word("3.1", "go", "O"),
            "",
            "# newdoc",
            word("1", "Berlin", "B-LOC"),
            "",
        ]
    ),
    "four columns": "1\tParis\t_\tB-LOC\n2\trocks\t_\tO\n",
    "a comment among the words": "\n".join([word("1", "Paris", "B-LOC"), "# late", ""]),
    "a word id that is not a number": "\n".join([word("x", "Paris", "B-LOC"), ""]),
}
CONLLU_EXPECTED = {
    "ten columns, comments, a multiword token, an empty node, documents": [
        ["Paris", "do", "not"],
        ["Berlin"],
    ],
    "four columns": (1, "expected 10 tab-separated columns (ID FORM LEMMA UPOS XPOS FEATS"),
    "a comment among the words": (2, "a comment inside a sentence; comments come before words"),
    "a word id that is not a number": (1, "word id 'x' is not a number"),
}


@pytest.mark.parametrize("name", list(CONLLU))
def test_training_evaluation_and_prediction_read_conllu_alike(name, tmp_path, small_tagger, capsys):
    """A CoNLL-U file means one thing to each: the same words, or the same refusal naming the
    same line (prediction once took a 4-column file training refused)."""
    from bistack.errors import DataError

    path = tmp_path / "data.conllu"
    path.write_text(CONLLU[name], encoding="utf-8")
    expected = CONLLU_EXPECTED[name]
    capsys.readouterr()
    if isinstance(expected, tuple):
        line, said = expected
        with pytest.raises(DataError) as refused:
            read_tagged(path, TaggerConfig().data)
        assert f"{path}:{line}: {said}" in str(refused.value)
        for command in (
            ["evaluate", str(small_tagger), str(path)],
            ["predict", str(small_tagger), "--input", str(path), "--format", "jsonl"],
        ):
            assert main(command) != 0
            assert f"{path}:{line}: {said}" in capsys.readouterr().err
        return
    sentences = read_tagged(path, TaggerConfig().data)
    assert [s.tokens for s in sentences] == expected
    assert [s.document for s in sentences] == [1, 2]
    assert main(["evaluate", str(small_tagger), str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gold_entities"] == 2
    assert main(["predict", str(small_tagger), "--input", str(path), "--format", "jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [[t["text"] for t in r["tokens"]] for r in records] == expected
