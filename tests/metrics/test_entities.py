"""Entity scoring agrees with seqeval's default (conlleval) mode."""

import random
import warnings

import pytest
from seqeval.metrics import accuracy_score, f1_score
from seqeval.metrics.sequence_labeling import precision_recall_fscore_support

from bistack.data.conll import read_conll
from bistack.metrics.entities import score_entities
from tests.conftest import shared_file

TYPES = ["PER", "LOC", "ORG", "MISC"]


def perturb(sentences, rate, seed, prefixes):
    """Change a fraction of tags to random ones, including invalid sequences."""
    rng = random.Random(seed)
    tags = [f"{p}-{t}" for p in prefixes for t in TYPES] + ["O"]
    return [[rng.choice(tags) if rng.random() < rate else tag for tag in s] for s in sentences]


def assert_agrees_with_seqeval(gold, predicted):
    warnings.simplefilter("ignore")  # seqeval warns about types with no gold or no prediction
    ours = score_entities(gold, predicted)
    assert ours.micro.f1 == pytest.approx(100 * f1_score(gold, predicted), abs=1e-9)
    assert ours.token_accuracy == pytest.approx(100 * accuracy_score(gold, predicted), abs=1e-9)
    precision, recall, f1, support = precision_recall_fscore_support(gold, predicted, average=None)
    labels = sorted({t.partition("-")[2] for s in [*gold, *predicted] for t in s} - {""})
    for label, p, r, f, n in zip(labels, precision, recall, f1, support, strict=True):
        assert ours.per_type[label].precision == pytest.approx(100 * p, abs=1e-9)
        assert ours.per_type[label].recall == pytest.approx(100 * r, abs=1e-9)
        assert ours.per_type[label].f1 == pytest.approx(100 * f, abs=1e-9)
        assert ours.per_type[label].gold == n


@pytest.mark.parametrize("rate", [0.02, 0.1, 0.3])
def test_agrees_with_seqeval_on_perturbed_conll_dev(rate):
    gold = [s.tags for s in read_conll(shared_file("conll2003", "dev.txt"))]
    assert_agrees_with_seqeval(gold, perturb(gold, rate, seed=int(rate * 100), prefixes="BI"))


@pytest.mark.parametrize(
    "predicted",
    [
        # IOB1: B- splits two adjacent entities of one type.
        [["I-PER", "I-PER", "B-PER", "O"]],
        # An I- after another type opens a new entity; a lone B- opens one too.
        [["I-PER", "I-LOC", "B-LOC", "O"]],
        [["B-PER", "O", "I-PER", "I-PER"]],
        [["O", "O", "O", "O"]],
    ],
)
def test_iob1_edge_cases(predicted):
    gold = [["I-PER", "I-PER", "B-PER", "O"]]
    assert_agrees_with_seqeval(gold, predicted)


@pytest.mark.parametrize(
    "predicted",
    [
        [["B-PER", "E-PER", "S-PER", "O", "S-LOC"]],
        [["B-PER", "I-PER", "E-PER", "S-PER", "S-LOC"]],
        [["S-PER", "S-PER", "S-PER", "O", "B-LOC"]],  # an unclosed B- at the end
        [["E-PER", "B-PER", "O", "I-LOC", "E-LOC"]],  # entities opened by E- and I-
    ],
)
def test_bioes_edge_cases(predicted):
    gold = [["B-PER", "E-PER", "S-PER", "O", "S-LOC"]]
    assert_agrees_with_seqeval(gold, predicted)


def test_random_bioes_sequences_agree_with_seqeval():
    rng = random.Random(0)
    tags = [f"{p}-{t}" for p in "BIES" for t in TYPES[:2]] + ["O"] * 4
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    predicted = perturb(gold, 0.3, seed=1, prefixes="BIES")
    assert_agrees_with_seqeval(gold, predicted)


def test_perfect_prediction_scores_100_and_counts_entities():
    gold = [["I-PER", "I-PER", "O", "I-LOC"], ["B-ORG", "O"]]
    scores = score_entities(gold, gold)
    assert scores.micro.f1 == 100.0
    assert scores.micro.gold == 3
    assert set(scores.per_type) == {"PER", "LOC", "ORG"}
