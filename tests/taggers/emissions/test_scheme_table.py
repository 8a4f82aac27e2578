"""The entity tables find the entities conlleval's rules read (``spans_from_tags``), and the
output scheme's table gives, tag for tag, what reading entities and writing them back gives
(``convert_tags``): for every path of up to four tags over two types, in every scheme, the
paths no scheme allows included, whether paths are converted one at a time or together."""

from __future__ import annotations

import itertools
import random

import pytest

from bistack.schemes import OUTPUT_SCHEMES, convert_tags
from bistack.taggers.emissions.confidence import spans_of
from bistack.taggers.emissions.scheme_table import SchemeTable, chunks_of, scheme_table

LABELS = ["O", *(f"{p}-{kind}" for kind in ("LOC", "PER") for p in "BIES")]
SHORT_PATHS = [
    list(path) for length in range(1, 5) for path in itertools.product(range(9), repeat=length)
]


def test_every_short_path_has_the_entities_conlleval_reads():
    expected = [spans_of(path, LABELS) for path in SHORT_PATHS]
    assert chunks_of(tuple(LABELS)).spans(SHORT_PATHS) == expected
    assert chunks_of(tuple(LABELS)).spans([]) == []


@pytest.mark.parametrize("scheme", OUTPUT_SCHEMES)
def test_every_short_path_converts_as_its_entities_would(scheme):
    table = SchemeTable(LABELS, scheme)
    paths = SHORT_PATHS
    expected = [convert_tags([LABELS[t] for t in path], scheme) for path in paths]
    assert table.tags(paths) == expected  # all at once
    assert [table.tags([path])[0] for path in paths[::97]] == expected[::97]  # one at a time


@pytest.mark.parametrize("scheme", ["IOB1", "BIO", "BIOES"])
def test_long_paths_of_a_real_tag_set_in_any_order(scheme):
    """Labels in the model's own order (not this module's), without an "O" of their own
    first, and sentences of up to 60 tokens."""
    labels = ["B-MISC", "I-ORG", "O", "E-PER", "S-LOC", "I-MISC", "B-PER", "I-LOC", "S-ORG"]
    rng = random.Random(0)
    paths = [rng.choices(range(len(labels)), k=rng.randint(1, 60)) for _ in range(300)]
    expected = [convert_tags([labels[t] for t in path], scheme) for path in paths]
    assert scheme_table(tuple(labels), scheme).tags(paths) == expected
    assert chunks_of(tuple(labels)).spans(paths) == [spans_of(path, labels) for path in paths]


def test_no_paths_no_tags_and_plain_labels_stay_as_they_are():
    assert SchemeTable(LABELS, "BIO").tags([]) == []
    plain = SchemeTable(["NOUN", "VERB"], "none")
    assert plain.tags([[1, 0, 0], [1]]) == [["VERB", "NOUN", "NOUN"], ["VERB"]]
