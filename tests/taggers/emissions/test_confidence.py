"""Token marginals, entity probabilities and the k best analyses (the output math PyTorch and
exported taggers share, over numpy), held to brute force: every tag sequence of a short sentence
enumerated, its probability under the CRF (or the independent softmax) computed, and the events
summed."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from bistack.crf import CRF
from bistack.kernels.crf_compiled import marginals_and_runs
from bistack.schemes import allowed_transitions
from bistack.taggers.emissions.confidence import (
    CRFScores,
    crf_confidences,
    independent_span_probabilities,
    span_event,
    spans_of,
)

LABELS = {
    "BIOES": ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC", "S-LOC"],
    "BIO": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
    "IOB1": ["O", "I-PER", "B-PER", "I-LOC"],
}


def make_crf(scheme: str, seed: int = 0) -> tuple[CRF, torch.Tensor]:
    torch.manual_seed(seed)
    labels = LABELS[scheme]
    crf = CRF(len(labels), allowed_transitions(scheme, labels), names=labels)
    with torch.no_grad():
        for parameter in crf.parameters():
            parameter.normal_()
    emissions = torch.randn(1, 4, len(labels)) * 2
    return crf, emissions


def scores_of(crf: CRF) -> CRFScores:
    return CRFScores(*(s.detach().numpy() for s in crf.constrained_scores()))


def path_probabilities(crf: CRF, emissions: torch.Tensor) -> dict[tuple[int, ...], float]:
    """Every tag sequence of length ``seq_len`` and its probability (brute force)."""
    transitions, start, end = crf.constrained_scores()
    scores = {}
    seq_len, num_tags = emissions.shape[1:]
    for path in itertools.product(range(num_tags), repeat=seq_len):
        score = start[path[0]] + end[path[-1]] + sum(emissions[0, t, p] for t, p in enumerate(path))
        score += sum(transitions[a, b] for a, b in itertools.pairwise(path))
        scores[path] = float(score.detach())
    top = max(scores.values())
    total = sum(math.exp(s - top) for s in scores.values())
    return {p: math.exp(s - top) / total for p, s in scores.items()}


def assert_span_probabilities(
    crf: CRF, emissions: torch.Tensor, best: list[int], scheme: str
) -> int:
    """Each entity of ``best`` has the probability that the paths holding it have (brute
    force); how many there were."""
    labels = LABELS[scheme]
    paths = path_probabilities(crf, emissions)
    spans = spans_of(best, labels)
    events = [span_event(span, best, labels, scheme) for span in spans]
    _, [got] = crf_confidences(scores_of(crf), emissions.numpy(), [4], [events])
    for span, probability in zip(spans, got, strict=True):
        truth = sum(p for path, p in paths.items() if span in spans_of(path, labels))
        assert probability == pytest.approx(truth, abs=1e-5)
    return len(spans)


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_marginals_are_the_summed_path_probabilities(scheme):
    crf, emissions = make_crf(scheme)
    marginals = crf_confidences(scores_of(crf), emissions.numpy(), [4], [[]])[0][0]
    expected = np.zeros_like(marginals)
    for path, probability in path_probabilities(crf, emissions).items():
        for t, tag in enumerate(path):
            expected[t, tag] += probability
    assert np.allclose(marginals, expected, atol=1e-5)
    assert np.allclose(marginals.sum(axis=1), np.ones(4), atol=1e-5)


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_an_entity_confidence_is_the_probability_of_its_span(scheme):
    for seed in range(6):
        crf, emissions = make_crf(scheme, seed)
        best = list(crf.decode(emissions).to_lists()[0])
        assert_span_probabilities(crf, emissions, best, scheme)


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_an_entity_confidence_holds_where_every_tag_of_a_token_scores_far_below_a_forbidden_move(
    scheme,
):
    """A sharply tempered (or float16-trained) tagger's emissions reach -1e4 and below at a
    token: a span's clamped partition must still be a part of the whole (it once rose above
    it, and fitting the temperature ended in ``OverflowError``)."""
    checked = 0
    for seed in range(4):
        crf, emissions = make_crf(scheme, seed)
        emissions = emissions.double()
        emissions[0, 1] -= 2e4  # one token's every tag: the same probabilities, far below
        paths = path_probabilities(crf, emissions)
        best = list(max(paths, key=paths.__getitem__))
        checked += assert_span_probabilities(crf, emissions, best, scheme)
    assert checked


@pytest.mark.parametrize("scheme", ["BIOES", "BIO", "IOB1"])
def test_entity_confidences_of_a_padded_batch_are_each_sentences_own(scheme):
    """Sentences of different lengths in one batch, padding full of large scores: each entity's
    probability is its own sentence's (brute force over that sentence alone), whichever row it
    sits in and however many entities the rows before it had."""
    labels = LABELS[scheme]
    crf, _ = make_crf(scheme)
    lengths = [4, 2, 3, 1, 4]
    torch.manual_seed(7)
    emissions = torch.randn(len(lengths), 4, len(labels)) * 2
    for row, length in enumerate(lengths):
        emissions[row, length:] = 50.0
    sentences = [emissions[row : row + 1, :length] for row, length in enumerate(lengths)]
    paths = [path_probabilities(crf, sentence) for sentence in sentences]
    best = [list(max(p, key=p.__getitem__)) for p in paths]
    spans = [spans_of(path, labels) for path in best]
    events = [
        [span_event(span, path, labels, scheme) for span in row_spans]
        for path, row_spans in zip(best, spans, strict=True)
    ]
    marginals, got = crf_confidences(scores_of(crf), emissions.numpy(), lengths, events)
    assert sum(map(len, spans)) >= len(lengths)
    for row, length in enumerate(lengths):
        assert np.all(marginals[row, length:] == 0.0)
        for span, probability in zip(spans[row], got[row], strict=True):
            truth = sum(p for path, p in paths[row].items() if span in spans_of(path, labels))
            assert probability == pytest.approx(truth, abs=1e-5)


@pytest.mark.parametrize("scheme", ["BIOES", "BIO"])
def test_entity_confidences_hold_where_the_scaled_sums_underflow(scheme):
    """Position 0 all but forces B-PER; position 1 scores every tag B-PER may go on to 1000
    nats below one it may not, so the scaled forward sums are exactly 0 there and the pass is
    redone in log space: the entities' probabilities come from that pass too."""
    labels = LABELS[scheme]
    crf, emissions = make_crf(scheme, seed=1)
    emissions = emissions.double()
    emissions[0, 0, labels.index("B-PER")] = 1000.0
    emissions[0, 1] = -1000.0
    emissions[0, 1, labels.index("B-LOC" if scheme == "BIOES" else "I-LOC")] = 0.0
    paths = path_probabilities(crf, emissions)
    best = list(max(paths, key=paths.__getitem__))
    assert assert_span_probabilities(crf, emissions, best, scheme)
    marginals, _ = crf_confidences(scores_of(crf), emissions.numpy(), [4], [[]])
    assert np.isfinite(marginals).all()


def test_runs_outside_their_sentence_are_refused():
    crf, emissions = make_crf("BIOES")
    scores = scores_of(crf)
    arrays = (emissions.numpy(), np.array([4]), scores.transitions, scores.start, scores.end)
    beyond = (np.array([0]), np.array([3]), np.array([0, 2]), np.array([1, 3]))
    unknown = (np.array([0]), np.array([0]), np.array([0, 1]), np.array([len(LABELS["BIOES"])]))
    for runs in (beyond, unknown):
        with pytest.raises(ValueError, match="within its row"):
            marginals_and_runs(*arrays, runs)


@pytest.mark.parametrize("scheme", ["BIO", "IOB1"])
def test_softmax_entity_confidence_is_the_span_probability_of_independent_tokens(scheme):
    labels = LABELS[scheme]
    for seed in range(6):
        torch.manual_seed(seed)
        probabilities = (torch.randn(4, len(labels)) * 2).softmax(dim=-1)
        path = probabilities.argmax(dim=-1).tolist()
        spans = spans_of(path, labels) or spans_of([1, 1, 0, 0], labels)
        events = [span_event(span, path, labels, scheme) for span in spans]
        got = independent_span_probabilities(probabilities.numpy(), 4, events)
        for span, probability in zip(spans, got, strict=True):
            truth = 0.0
            for tags in itertools.product(range(len(labels)), repeat=4):
                if span in spans_of(tags, labels):
                    truth += math.prod(float(probabilities[t, tag]) for t, tag in enumerate(tags))
            assert probability == pytest.approx(truth, abs=1e-6)


@pytest.mark.parametrize("scheme", ["BIOES", "BIO"])
def test_the_k_best_analyses_are_the_most_probable_paths(scheme):
    from bistack.taggers.emissions.decoding import TagDecoder

    labels = LABELS[scheme]
    crf, emissions = make_crf(scheme, seed=4)
    decoder = TagDecoder(labels, scheme, scores_of(crf))
    [analysis] = decoder.analyse(emissions.numpy(), [4], top_k=3)
    truth = sorted(path_probabilities(crf, emissions).items(), key=lambda kv: -kv[1])[:3]
    assert [path for path, _ in analysis.alternatives] == [list(p) for p, _ in truth]
    assert [p for _, p in analysis.alternatives] == pytest.approx([p for _, p in truth], abs=1e-5)
    assert analysis.alternatives[0][0] == analysis.path


def test_the_k_best_paths_of_independent_tokens_are_exact():
    from bistack.taggers.emissions.confidence import independent_best_paths

    torch.manual_seed(5)
    log_probabilities = torch.randn(4, 3).log_softmax(dim=-1)
    scored = {
        path: math.exp(sum(float(log_probabilities[t, tag]) for t, tag in enumerate(path)))
        for path in itertools.product(range(3), repeat=4)
    }
    truth = sorted(scored.items(), key=lambda kv: -kv[1])[:5]
    got = independent_best_paths(log_probabilities.numpy(), 5)
    assert [p for _, p in got] == pytest.approx([p for _, p in truth], abs=1e-9)
    assert [tuple(path) for path, _ in got] == [path for path, _ in truth]
