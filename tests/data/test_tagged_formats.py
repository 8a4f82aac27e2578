"""Tagged data in the shapes people have it: CoNLL with comments, CoNLL-U, span JSON lines
(doccano, Label Studio). Each reader names the line of a malformed record, and each format
written by bistack reads back to the same tags."""

from __future__ import annotations

import json

import pytest

from bistack.data.conll import read_conll
from bistack.data.conllu import read_conllu, write_conllu
from bistack.data.spans import SpanReport, read_spans
from bistack.errors import DataError
from bistack.schemes import spans_from_tags

CONLLU = """# newdoc id = d1
# sent_id = s1
# text = John's car left Paris.
1-2\tJohn's\t_\t_\t_\t_\t_\t_\t_\t_
1\tJohn\tJohn\tPROPN\tNNP\t_\t3\tnmod\t_\tNER=B-PER
2\t's\t's\tPART\tPOS\t_\t1\tcase\t_\tNER=O
3\tcar\tcar\tNOUN\tNN\t_\t4\tnsubj\t_\tNER=O
4\tleft\tleave\tVERB\tVBD\t_\t0\troot\t_\tNER=O
4.1\tgone\t_\t_\t_\t_\t_\t_\t_\t_
5\tParis\tParis\tPROPN\tNNP\t_\t4\tobj\t_\tSpaceAfter=No|NER=B-LOC
6\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\tNER=O

# sent_id = s2
1\tRain\train\tNOUN\tNN\t_\t0\troot\t_\tNER=O

"""


def test_conll_comment_lines_are_skipped_and_the_token_hash_is_kept(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(
        "# sent_id = 1\n# text = John left\nJohn NNP I-NP I-PER\nleft VBD I-VP O\n\n"
        "#newdoc\n# NN I-NP O\n1 CD I-NP O\n\n"
    )
    sentences = read_conll(path)
    assert [s.tokens for s in sentences] == [["John", "left"], ["#", "1"]]
    assert sentences[0].line == 3 and sentences[1].line == 7  # the comments were never tokens


def test_conll_comment_before_a_bad_line_keeps_the_line_number(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("# sent_id = 1\nJohn NNP I-NP I-PER\nleft VBD I-VP X-ORG\n")
    with pytest.raises(DataError) as error:
        read_conll(path)
    assert str(error.value).startswith(f"{path}:3: invalid tag 'X-ORG'")


@pytest.mark.parametrize(
    ("field", "tags"),
    [
        ("upos", [["PROPN", "PART", "NOUN", "VERB", "PROPN", "PUNCT"], ["NOUN"]]),
        ("xpos", [["NNP", "POS", "NN", "VBD", "NNP", "."], ["NN"]]),
        ("misc:NER", [["B-PER", "O", "O", "O", "B-LOC", "O"], ["O"]]),
    ],
)
def test_conllu_reads_any_column_as_the_tag_and_skips_ranges_and_empty_nodes(tmp_path, field, tags):
    path = tmp_path / "train.conllu"
    path.write_text(CONLLU)
    sentences = read_conllu(path, field, plain=field != "misc:NER")
    assert [s.tokens for s in sentences] == [["John", "'s", "car", "left", "Paris", "."], ["Rain"]]
    assert [s.tags for s in sentences] == tags
    assert sentences[0].metadata == {
        "newdoc id": "d1",
        "sent_id": "s1",
        "text": "John's car left Paris.",
    }
    assert sentences[0].line == 5


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("1\tJohn\tJohn\tPROPN\n", "upos", ":1: expected 10 tab-separated columns"),
        ("x\tJohn\t_\tPROPN\t_\t_\t_\t_\t_\t_\n", "upos", ":1: word id 'x' is not a number"),
        ("1\tJohn\t_\t_\t_\t_\t_\t_\t_\t_\n", "upos", ":1: no tag in UPOS (it is '_')"),
        ("# a\n1\tJohn\t_\tX\t_\t_\t_\t_\t_\tSpaceAfter=No\n", "misc:NER", ":2: MISC has no NER="),
        ("1\tJohn\t_\tX\t_\t_\t_\t_\t_\tNER=Q-PER\n", "misc:NER", ":1: invalid tag 'Q-PER'"),
        ("1\tA\t_\tX\t_\t_\t_\t_\t_\t_\n# late\n", "upos", ":2: a comment inside a sentence"),
        ("# only\n\n", "upos", ":2: a sentence with comments but no words"),
        ("", "upos", ": no sentences found"),
        ("1\tA\t_\tX\t_\t_\t_\t_\t_\t_\n", "form", ": data.tag_field 'form'"),
    ],
)
def test_malformed_conllu_names_the_line(tmp_path, text, field, message):
    path = tmp_path / "bad.conllu"
    path.write_text(text)
    with pytest.raises(DataError) as error:
        read_conllu(path, field, plain=field != "misc:NER")
    assert str(error.value).startswith(f"{path}{message}")


def test_conllu_round_trips(tmp_path):
    sentences = [(["John", "left", "Paris"], ["B-PER", "O", "B-LOC"]), (["Rain"], ["O"])]
    path = tmp_path / "out.conllu"
    path.write_text(write_conllu(sentences, "misc:NER", ["John left Paris", "Rain"]))
    back = read_conllu(path, "misc:NER", plain=False)
    assert [(s.tokens, s.tags) for s in back] == sentences
    assert back[0].metadata == {"text": "John left Paris"}
    path.write_text(write_conllu([(["Rain", "fell"], ["NOUN", "VERB"])], "upos"))
    assert [s.tags for s in read_conllu(path, "upos")] == [["NOUN", "VERB"]]


def write_lines(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_doccano_and_label_studio_spans_become_tags_in_the_scheme(tmp_path):
    path = write_lines(
        tmp_path / "spans.jsonl",
        [
            {"text": "John Smith lives in New York.", "label": [[0, 10, "PER"], [20, 28, "LOC"]]},
            {"text": "Rain.", "label": []},
            {"text": "Ask IBM.", "entities": [{"start": 4, "end": 7, "label": "ORG"}]},
            {"text": "Ask IBM.", "spans": [{"start": 4, "end": 7, "labels": ["ORG"]}]},
        ],
    )
    sentences = read_spans(path, "BIOES")
    assert sentences[0].tokens == ["John", "Smith", "lives", "in", "New", "York", "."]
    assert sentences[0].tags == ["B-PER", "E-PER", "O", "O", "B-LOC", "E-LOC", "O"]
    assert sentences[1].tags == ["O", "O"]
    assert sentences[2].tags == sentences[3].tags == ["O", "S-ORG", "O"]
    assert [s.line for s in sentences] == [1, 2, 3, 4]
    assert read_spans(path, "IOB1")[0].tags == ["I-PER", "I-PER", "O", "O", "I-LOC", "I-LOC", "O"]


def test_a_span_off_token_boundaries_is_rejected_or_snapped_never_dropped(tmp_path):
    path = write_lines(
        tmp_path / "spans.jsonl",
        [{"text": "Rain.", "label": []}, {"text": "I saw New York.", "label": [[6, 13, "LOC"]]}],
    )
    with pytest.raises(DataError) as error:
        read_spans(path, "BIO")
    assert str(error.value) == (
        f"{path}:2: span 'New Yor' (6-13, LOC) does not fall on token boundaries: the tokens "
        "it touches are 'New York'; fix the span, or set data.misaligned_spans to snap to "
        "widen it to them"
    )
    report = SpanReport()
    snapped = read_spans(path, "BIO", misaligned="snap", report=report)
    assert snapped[1].tags == ["O", "O", "B-LOC", "I-LOC", "O"]
    assert report.snapped == [(2, "New Yor", "New York")]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ('{"text": "Ask IBM.", "label": [[4, 7, "ORG"], [4, 8, "LOC"]]}', "overlap"),
        ('{"text": "Ask IBM.", "label": [[4, 70, "ORG"]]}', "0 <= start < end <= 8"),
        ('{"text": "Ask IBM.", "label": [[4, 7]]}', "expected [start, end, label]"),
        ('{"text": "Ask IBM.", "label": [[4, 7, ""]]}', "the label must be a type name"),
        ('{"text": "Ask IBM."}', "no spans: expected one of label"),
        ('{"text": "", "label": []}', "no text"),
        ('{"text": "Ask", "label": [}', "not a JSON object"),
        ('["Ask"]', "not a JSON object"),
    ],
)
def test_malformed_span_records_name_their_line(tmp_path, record, message):
    path = tmp_path / "spans.jsonl"
    path.write_text('{"text": "Rain.", "label": []}\n\n' + record + "\n")
    with pytest.raises(DataError) as error:
        read_spans(path, "BIO")
    assert str(error.value).startswith(f"{path}:3: ")
    assert message in str(error.value)


def test_predicted_doccano_lines_read_back_as_the_predicted_tags(small_tagger, tmp_path):
    from bistack.api import Tagger

    tagger = Tagger.load(small_tagger)
    texts = ["Anna visited New York yesterday.", "Paul left Rome yesterday. Mary loves Paris."]
    predictions = tagger.predict(texts)
    assert any(p.entities for p in predictions)
    path = write_lines(tmp_path / "back.jsonl", [p.to_doccano() for p in predictions])
    back = read_spans(path, tagger.output_scheme)
    for prediction, sentence in zip(predictions, back, strict=True):
        tags = [tag for s in prediction for tag in s.tags]
        assert spans_from_tags(sentence.tags) == spans_from_tags(tags)


def test_predict_reads_conllu_and_commented_conll_input(tmp_path):
    from bistack.corpus.sources import read_records

    path = tmp_path / "in.conllu"
    path.write_text(CONLLU)
    records = list(read_records(str(path), "conllu"))
    assert [(r.value, r.line) for r in records] == [
        (["John", "'s", "car", "left", "Paris", "."], 5),
        (["Rain"], 14),
    ]
    path = tmp_path / "in.conll"
    path.write_text("# sent_id = 1\nJohn NNP\n# NNP\n\n#text\nRain NN\n")
    assert [r.value for r in read_records(str(path), "conll")] == [["John", "#"], ["Rain"]]
