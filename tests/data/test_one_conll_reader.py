"""One CoNLL reader: training, evaluation and ``predict --input`` read the same file into the
same sentences (tweets whose sentences start with a ``#hashtag`` token, comments, blank-line
variants), so that a file means one thing to each."""

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
