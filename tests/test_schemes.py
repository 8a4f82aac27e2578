import pytest

from bistack.schemes import (
    Span,
    allowed_transitions,
    convert_tags,
    detect_scheme,
    spans_from_tags,
    tags_from_spans,
)

IOB1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "O"]
BIO = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "O"]
BIOES = ["B-PER", "E-PER", "S-PER", "O", "S-LOC", "S-ORG", "O"]
SPANS = [Span(0, 2, "PER"), Span(2, 3, "PER"), Span(4, 5, "LOC"), Span(5, 6, "ORG")]


@pytest.mark.parametrize("tags", [IOB1, BIO, BIOES])
def test_spans_are_the_same_in_every_scheme(tags):
    assert spans_from_tags(tags) == SPANS


@pytest.mark.parametrize(("scheme", "tags"), [("IOB1", IOB1), ("BIO", BIO), ("BIOES", BIOES)])
def test_conversion_round_trips(scheme, tags):
    assert tags_from_spans(SPANS, len(IOB1), scheme) == tags
    for source in (IOB1, BIO, BIOES):
        assert convert_tags(source, scheme) == tags


def test_detect_scheme():
    assert detect_scheme([["O"], IOB1]) == "IOB1"
    assert detect_scheme([BIO]) == "BIO"
    assert detect_scheme([BIOES]) == "BIOES"


def allowed_pairs(scheme, labels):
    allowed = allowed_transitions(scheme, labels)
    pairs = {
        (a, b)
        for i, a in enumerate(labels)
        for j, b in enumerate(labels)
        if allowed.transitions[i][j]
    }
    starts = {label for label, ok in zip(labels, allowed.start, strict=True) if ok}
    ends = {label for label, ok in zip(labels, allowed.end, strict=True) if ok}
    return pairs, starts, ends


def test_bio_forbids_inside_after_outside_or_other_type():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    pairs, starts, ends = allowed_pairs("BIO", labels)
    assert ("O", "I-PER") not in pairs
    assert ("B-LOC", "I-PER") not in pairs
    assert ("B-PER", "I-PER") in pairs and ("I-PER", "I-PER") in pairs
    assert starts == {"O", "B-PER", "B-LOC"}
    assert ends == set(labels)


def test_iob1_allows_b_only_between_same_type_entities():
    labels = ["O", "B-PER", "I-PER", "I-LOC"]
    pairs, starts, _ = allowed_pairs("IOB1", labels)
    assert ("O", "B-PER") not in pairs
    assert ("I-LOC", "B-PER") not in pairs
    assert ("I-PER", "B-PER") in pairs
    assert ("O", "I-PER") in pairs
    assert starts == {"O", "I-PER", "I-LOC"}


def test_bioes_constraints():
    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "S-LOC"]
    pairs, starts, ends = allowed_pairs("BIOES", labels)
    assert pairs >= {("B-PER", "I-PER"), ("B-PER", "E-PER"), ("E-PER", "S-LOC"), ("S-PER", "B-PER")}
    assert ("B-PER", "O") not in pairs
    assert ("O", "E-PER") not in pairs
    assert ("I-PER", "S-PER") not in pairs
    assert starts == {"O", "B-PER", "S-PER", "S-LOC"}
    assert ends == {"O", "E-PER", "S-PER", "S-LOC"}


def test_unknown_scheme_and_bad_labels():
    with pytest.raises(ValueError) as error:
        allowed_transitions("BILOU", ["O"])
    assert (
        str(error.value) == "unknown tag scheme: 'BILOU' (expected one of 'IOB1', 'BIO', 'BIOES')"
    )
    with pytest.raises(ValueError) as error:
        allowed_transitions("BIO", ["O", "S-PER"])
    assert str(error.value) == "label 'S-PER' has a prefix that scheme BIO does not use"
    with pytest.raises(ValueError) as error:
        allowed_transitions("BIO", ["X-PER"])
    assert str(error.value) == (
        "invalid tag 'X-PER': expected 'O' or a prefix B-, I-, E-, S- and a type"
    )
