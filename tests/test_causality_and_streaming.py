"""Causality: the leakage check catches a bidirectional encoder and passes causal models; a
streaming tagger emits what the same model emits in one batched pass."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn

from bistack.causality import LeakageError, check_causal, require_causal
from bistack.crf import CRF
from bistack.data.batching import collate_tagging
from bistack.data.features import TokenVocabularies
from bistack.encoders import RecurrentEncoder
from bistack.fixed_lag import FixedLagDecoder, decode_with_lag
from bistack.taggers.models.tagger import Tagger
from bistack.taggers.networks.network import build_tagger
from bistack.taggers.networks.streaming import StreamingTagger
from bistack.tasks import config_from_dict
from tests.conftest import tiny_config, tiny_sentences


@dataclass(frozen=True)
class Tokens:
    words: Tensor  # (batch, seq)


class EncoderOverTokens(nn.Module):
    """Embedding + a recurrent encoder; per-position states as outputs."""

    def __init__(self, **options) -> None:
        super().__init__()
        self.embedding = nn.Embedding(20, 8)
        self.encoder = RecurrentEncoder(8, 6, **options)

    def position_outputs(self, batch: Tokens) -> Tensor:
        return self.encoder(self.embedding(batch.words), mask=batch.words > 0).states


def tokens() -> Tokens:
    return Tokens(torch.randint(1, 20, (3, 7), generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("cell", ["lstm", "gru", "mingru", "minlstm"])
@pytest.mark.parametrize("layers,residual", [(1, False), (2, False), (3, True)])
def test_the_check_passes_unidirectional_encoders(cell, layers, residual):
    torch.manual_seed(0)
    model = EncoderOverTokens(cell=cell, bidirectional=False, num_layers=layers, residual=residual)
    check_causal(model, tokens(), vocab_size=20)


@pytest.mark.parametrize("cell", ["lstm", "gru", "mingru", "minlstm"])
def test_the_check_catches_a_bidirectional_encoder(cell):
    torch.manual_seed(0)
    model = EncoderOverTokens(cell=cell, bidirectional=True)
    with pytest.raises(LeakageError, match=r"when only tokens after position 0 changed"):
        check_causal(model, tokens(), vocab_size=20)


def test_the_check_ignores_padding_and_restores_training_mode():
    torch.manual_seed(0)
    model = EncoderOverTokens(bidirectional=False).train()
    batch = Tokens(torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 9, 10]]))
    check_causal(model, batch, vocab_size=20)
    assert model.training


def test_the_guard_explains_the_leakage_and_can_be_overridden_explicitly():
    with pytest.raises(LeakageError, match=r"a language model is causal: .* backward direction"):
        require_causal(True, "a language model")
    require_causal(False, "a language model")
    require_causal(True, "a language model", allow_leakage=True)


def test_a_bidirectional_encoder_refuses_to_step():
    encoder = RecurrentEncoder(4, 3, bidirectional=True)
    with pytest.raises(ValueError, match="cannot run one token at a time"):
        encoder.step(torch.randn(1, 4))


@pytest.mark.parametrize("cell", ["lstm", "gru", "mingru", "minlstm"])
@pytest.mark.parametrize("layers,residual", [(1, False), (2, False), (2, True)])
def test_stepping_equals_the_packed_forward(cell, layers, residual):
    torch.manual_seed(0)
    encoder = RecurrentEncoder(
        4, 3, cell=cell, bidirectional=False, num_layers=layers, residual=residual
    ).eval()
    inputs = torch.randn(2, 5, 4)
    full = encoder(inputs, lengths=torch.tensor([5, 5])).states
    state, steps = None, []
    for t in range(5):
        output, state = encoder.step(inputs[:, t], state)
        steps.append(output)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-6, rtol=1e-5)


def brute_force_best(emissions, transitions, start, end):
    import itertools

    best, best_path = float("-inf"), None
    for path in itertools.product(range(emissions.shape[1]), repeat=emissions.shape[0]):
        score = start[path[0]] + end[path[-1]] + sum(emissions[i, t] for i, t in enumerate(path))
        score += sum(transitions[a, b] for a, b in itertools.pairwise(path))
        if score > best:
            best, best_path = float(score), list(path)
    return best_path


def test_fixed_lag_decoding_greedy_and_exact_cases():
    torch.manual_seed(0)
    crf = CRF(3)
    emissions = torch.randn(1, 5, 3)
    mask = torch.ones(1, 5, dtype=torch.bool)
    transitions, start, end = crf.constrained_scores()
    # A lag of at least the length is exact Viterbi.
    exact = brute_force_best(emissions[0], transitions.detach(), start.detach(), end.detach())
    assert decode_with_lag(crf, emissions, mask, lag=5) == [exact]
    assert decode_with_lag(crf, emissions, mask, lag=5) == crf.decode(emissions, mask).to_lists()
    # Lag 0 is greedy: each tag the best given the previous one.
    greedy, previous = [], None
    for row in emissions[0]:
        scores = row + (start if previous is None else transitions[previous])
        previous = int(scores.argmax())
        greedy.append(previous)
    assert decode_with_lag(crf, emissions, mask, lag=0) == [greedy]
    # With lag k, position t's tag is committed once position t + k has arrived.
    decoder = FixedLagDecoder(crf, lag=2)
    committed = [decoder.push(emissions[0, t]) for t in range(5)]
    assert [len(c) for c in committed] == [0, 0, 1, 1, 1]
    assert len(decoder.flush()) == 2


def make_streaming_tagger(head: str, bidirectional: bool = False, lag: int = 0) -> Tagger:
    sentences = tiny_sentences(20, seed=0)
    pairs = [([w for w, _ in s], [t.replace("I-", "S-") for _, t in s]) for s in sentences]
    pairs = [(w, ["S-PER", "O"] + ["S-LOC"] * (len(w) - 4) + ["O", "O"]) for w, _ in pairs]
    vocabularies = TokenVocabularies.build(pairs, min_freq=1, lowercase=True, normalise_digits=True)
    config = config_from_dict(
        tiny_config(
            "train.txt",
            None,
            head={"type": head, "stream_lag": lag},
            encoder={"bidirectional": bidirectional, "num_layers": 2},
        )
    )
    torch.manual_seed(0)
    model = build_tagger(config, vocabularies)
    if head == "crf":  # strong transitions: greedy, lagged and Viterbi decoding then disagree
        with torch.no_grad():
            model.head.project.weight.mul_(10.0)
            model.head.crf.transitions.normal_(0.0, 3.0, generator=torch.Generator().manual_seed(3))
    return Tagger(model, vocabularies, config, "BIOES")


@pytest.mark.parametrize("head,lag", [("softmax", 0), ("crf", 0), ("crf", 1), ("crf", 3)])
def test_streaming_emits_what_the_batch_pass_emits(head, lag):
    tagger = make_streaming_tagger(head, lag=lag)
    stream = StreamingTagger(tagger)
    rng = random.Random(0)
    sentences = [
        [w for w, _ in s] + rng.sample(["unseen", "Zürich", "1796", "and"], 2)
        for s in tiny_sentences(6, seed=3)
    ]
    expected = stream.tag_batch(sentences)
    if head == "crf" and lag < 3:  # the case is only a test if the lag changes the tags
        assert expected != tagger.tag_tokens(sentences)
    for sentence, tags in zip(sentences, expected, strict=True):
        emitted = []
        for position, token in enumerate(sentence):
            now = stream.push(token)
            emitted += now
            ready = position + 1 - (lag if head == "crf" else 0)
            assert len(emitted) == max(ready, 0)  # each tag as soon as the lag allows
        emitted += stream.flush()
        assert [token for token, _ in emitted] == sentence
        assert [tag for _, tag in emitted] == tags


def test_streaming_with_a_lag_as_long_as_the_sentence_is_the_batch_viterbi():
    tagger = make_streaming_tagger("crf", lag=50)
    sentence = [w for w, _ in tiny_sentences(1, seed=5)[0]]
    stream = StreamingTagger(tagger)
    for token in sentence:
        assert stream.push(token) == []
    tags = [tag for _, tag in stream.flush()]
    assert tags == tagger.tag_tokens([sentence])[0]


def test_a_bidirectional_tagger_refuses_to_stream():
    tagger = make_streaming_tagger("crf", bidirectional=True)
    with pytest.raises(LeakageError, match="a streaming tagger is causal"):
        StreamingTagger(tagger)


def test_the_tagger_encoder_passes_the_check_only_when_unidirectional():
    for bidirectional in (False, True):
        tagger = make_streaming_tagger("softmax", bidirectional=bidirectional)
        vocabularies = tagger.vocabularies
        batch = collate_tagging(
            [vocabularies.encode(["Anna", "visited", "Paris", "yesterday", "."])], vocabularies
        )
        if bidirectional:
            with pytest.raises(LeakageError):
                check_causal(tagger.model, batch, outputs=tagger.model.states)
        else:
            check_causal(tagger.model, batch, outputs=tagger.model.states)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_predict_stream_prints_each_tag_as_its_token_arrives(
    tmp_path, monkeypatch, capsys, bidirectional
):
    import io

    import yaml

    from bistack.cli import main
    from tests.conftest import write_conll

    train = write_conll(tmp_path / "train.txt", tiny_sentences(60, seed=0))
    config = tiny_config(train, None, encoder={"bidirectional": bidirectional})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"]) == 0
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO("Mary visited\nParis yesterday .\n\nPaul left\n"))
    code = main(["predict", str(tmp_path / "run" / "model"), "--stream"])
    captured = capsys.readouterr()
    if bidirectional:
        assert code == 2 and "a streaming tagger is causal" in captured.err
        return
    assert code == 0
    lines = captured.out.splitlines()
    assert [line.split("\t")[0] for line in lines if line] == [
        "Mary", "visited", "Paris", "yesterday", ".", "Paul", "left",
    ]  # fmt: skip
    assert lines[5] == ""  # the blank line ended the first sentence
    assert all(line.split("\t")[1][0] in "OBI" for line in lines if line)  # input scheme IOB1
