"""Dropout with a cheap CPU mask: the statistics, gradient and switches of nn.Dropout."""

import math

import pytest
import torch
from torch import nn

from bistack.dropout import Dropout, dropout, keep_mask, part_dropout


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5, 0.9])
def test_each_element_is_kept_with_probability_one_minus_p_and_the_mean_is_unchanged(p):
    torch.manual_seed(0)
    ones = torch.ones(400_003)  # not a multiple of 4: the last 64-bit word is cut
    out = dropout(ones, p)
    kept = (out != 0).double().mean().item()
    sigma = math.sqrt(p * (1 - p) / ones.numel())
    assert abs(kept - (1 - p)) < 5 * sigma
    assert out.double().mean().item() == pytest.approx(1.0, abs=5 * sigma / (1 - p))
    assert set(out.unique().tolist()) <= {0.0, out.max().item()}


def test_all_four_draws_of_each_random_word_are_uniform():
    """Each 64-bit word feeds four elements; its top bit is always 0, which must not bias
    the fourth (a raw signed 16-bit view would keep it about 100% of the time at p=0.5)."""
    torch.manual_seed(1)
    keep, _ = keep_mask((250_000, 4), 0.5)
    per_lane = keep.double().mean(dim=0)
    assert torch.all((per_lane - 0.5).abs() < 5 * math.sqrt(0.25 / 250_000))


def test_gradient_is_the_same_mask_and_scale():
    torch.manual_seed(2)
    x = torch.randn(8, 5, 7, requires_grad=True)
    out = dropout(x, 0.3)
    out.backward(torch.ones_like(out))
    assert x.grad is not None
    factor = torch.where(out != 0, out / x, torch.zeros_like(x))
    torch.testing.assert_close(x.grad, factor.detach())


def test_eval_mode_and_p_zero_return_the_input_and_p_one_returns_zeros():
    x = torch.randn(3, 4, requires_grad=True)
    layer = Dropout(0.5).eval()
    assert layer(x) is x
    assert dropout(x, 0.0) is x
    zeros = dropout(x, 1.0)
    assert torch.equal(zeros, torch.zeros_like(x))


def test_the_seed_makes_masks_repeatable():
    torch.manual_seed(3)
    first = dropout(torch.ones(1000), 0.5)
    torch.manual_seed(3)
    assert torch.equal(first, dropout(torch.ones(1000), 0.5))


def test_a_bad_probability_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        dropout(torch.ones(3), -0.1)


def test_a_drop_in_for_nn_dropout_in_state_and_description():
    assert Dropout(0.2).state_dict() == nn.Dropout(0.2).state_dict() == {}
    assert repr(Dropout(0.2)) == "Dropout(p=0.2)"


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_part_dropout_keeps_or_drops_each_token_vector_whole(p):
    torch.manual_seed(3)
    x = torch.rand(200, 50, 6) + 0.5  # no zeros of its own
    out = part_dropout(x, p)
    dropped = (out == 0).all(dim=-1)  # (200, 50)
    assert torch.equal((out == 0).any(dim=-1), dropped)  # never part of a vector
    sigma = math.sqrt(p * (1 - p) / dropped.numel())
    assert abs(dropped.double().mean().item() - p) < 5 * sigma
    kept = ~dropped
    torch.testing.assert_close(out[kept], x[kept] * out[kept][0, 0] / x[kept][0, 0])
    assert out[kept][0, 0] / x[kept][0, 0] == pytest.approx(1 / (1 - p), rel=1e-4)


def test_part_dropout_gradient_follows_the_mask_and_is_off_in_eval():
    torch.manual_seed(4)
    x = torch.randn(4, 9, 5, requires_grad=True)
    out = part_dropout(x, 0.4)
    out.sum().backward()
    assert x.grad is not None
    dropped = (out == 0).all(dim=-1, keepdim=True).expand_as(x)
    assert torch.all(x.grad[dropped] == 0) and torch.all(x.grad[~dropped] > 1)
    assert part_dropout(x, 0.4, training=False) is x
    assert part_dropout(x, 0.0) is x
    assert torch.all(part_dropout(x, 1.0) == 0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        part_dropout(x, 1.5)
