import pytest
import torch

from bistack.encoders import RecurrentEncoder
from bistack.pooling import (
    AdditiveAttention,
    DotProductAttention,
    LastStatePooling,
    MaxPooling,
    MeanPooling,
    attend,
    build_pooling,
)

NAMES = ["last", "mean", "max", "additive", "dot"]


def test_seed_worked_example_the_film_was_not_good():
    scores = torch.tensor([[0.10, 0.80, 0.05, 2.40, 2.10]])
    states = torch.eye(5).unsqueeze(0)
    pooled = attend(states, scores, torch.ones(1, 5, dtype=torch.bool))
    expected = torch.tensor([[0.047, 0.094, 0.045, 0.468, 0.347]])
    # The seed prints three decimals (0.3464 shows as 0.347), so compare to within 1e-3.
    torch.testing.assert_close(pooled.weights, expected, atol=1e-3, rtol=0)
    torch.testing.assert_close(pooled.vector, pooled.weights)


@pytest.mark.parametrize("pooling", [AdditiveAttention(6, 4), DotProductAttention(6)])
def test_attention_sums_to_one_over_real_positions_and_is_exactly_zero_on_padding(pooling):
    torch.manual_seed(0)
    states = torch.randn(3, 7, 6) * 10
    mask = torch.tensor([[True] * 7, [True] * 2 + [False] * 5, [True] + [False] * 6])
    pooled = pooling(states, mask)
    torch.testing.assert_close(pooled.weights.sum(dim=1), torch.ones(3))
    assert torch.all(pooled.weights[~mask] == 0)
    assert pooled.weights[2, 0] == 1


@pytest.mark.parametrize("name", NAMES)
def test_pooling_is_invariant_to_further_padding(name):
    torch.manual_seed(0)
    pooling = build_pooling(name, 6, bidirectional=True)
    states = torch.randn(2, 4, 6)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    more_states = torch.cat([states, torch.randn(2, 5, 6) * 50], dim=1)
    more_mask = torch.cat([mask, torch.zeros(2, 5, dtype=torch.bool)], dim=1)
    short, long = pooling(states, mask), pooling(more_states, more_mask)
    torch.testing.assert_close(short.vector, long.vector, atol=1e-6, rtol=0)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_last_state_pooling_equals_the_encoder_summary(bidirectional):
    torch.manual_seed(0)
    encoder = RecurrentEncoder(5, 4, bidirectional=bidirectional, num_layers=2).eval()
    out = encoder(torch.randn(3, 6, 5), lengths=torch.tensor([6, 1, 3]))
    pooled = LastStatePooling(bidirectional)(out.states, out.mask)
    torch.testing.assert_close(pooled.vector, out.summary)
    assert pooled.weights is None


def test_mean_and_max_pooling_use_real_positions_only():
    states = torch.tensor([[[1.0, 8.0], [3.0, -2.0], [99.0, 99.0]]])
    mask = torch.tensor([[True, True, False]])
    assert MeanPooling()(states, mask).vector.tolist() == [[2.0, 3.0]]
    assert MaxPooling()(states, mask).vector.tolist() == [[3.0, 8.0]]


@pytest.mark.parametrize("name", NAMES)
def test_a_row_without_real_tokens_raises_instead_of_nan(name):
    pooling = build_pooling(name, 6, bidirectional=True)
    mask = torch.tensor([[True, False], [False, False]])
    with pytest.raises(ValueError) as error:
        pooling(torch.randn(2, 2, 6), mask)
    assert str(error.value) == "every row needs at least one real token; row 1 has none"


@pytest.mark.parametrize("name", ["additive", "dot"])
def test_gradients_reach_every_attention_parameter(name):
    pooling = build_pooling(name, 6, bidirectional=True)
    pooled = pooling(torch.randn(2, 3, 6), torch.tensor([[True] * 3, [True, False, False]]))
    pooled.vector.sum().backward()
    for parameter_name, parameter in pooling.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, parameter_name


def test_unknown_pooling_name():
    with pytest.raises(ValueError) as error:
        build_pooling("sum", 6, bidirectional=True)  # type: ignore[arg-type]
    assert str(error.value) == (
        "unknown pooling: 'sum' (expected 'last', 'mean', 'max', 'additive' or 'dot')"
    )
