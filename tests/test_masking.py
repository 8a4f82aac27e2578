import pytest
import torch

from bistack.masking import (
    lengths_to_mask,
    mask_to_lengths,
    masked_max,
    masked_mean,
    masked_softmax,
)


def test_lengths_and_mask_round_trip():
    lengths = torch.tensor([3, 1, 4])
    mask = lengths_to_mask(lengths, max_len=6)
    assert mask.dtype == torch.bool
    assert mask.shape == (3, 6)
    assert mask.tolist()[1] == [True, False, False, False, False, False]
    assert torch.equal(mask_to_lengths(mask), lengths)


def test_masked_reductions_ignore_padding():
    states = torch.tensor([[[1.0], [3.0], [100.0]], [[-5.0], [-100.0], [-100.0]]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert masked_mean(states, mask).flatten().tolist() == [2.0, -5.0]
    assert masked_max(states, mask).flatten().tolist() == [3.0, -5.0]
    weights = masked_softmax(torch.zeros(2, 3), mask)
    assert weights.tolist() == [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (torch.ones(2, 3), "mask must be a bool tensor (True = real token), got torch.float32"),
        (torch.ones(3, dtype=torch.bool), "mask must be 2-D (batch_size, seq_len), got shape (3,)"),
        (
            torch.tensor([[True, False], [False, False]]),
            "every row needs at least one real token; row 1 has none",
        ),
        (
            torch.tensor([[True, False], [False, True]]),
            "mask must be right-padded (real tokens first); row 1 is not",
        ),
    ],
)
def test_bad_masks_raise_exact_messages(mask, message):
    with pytest.raises(ValueError) as error:
        mask_to_lengths(mask)
    assert str(error.value) == message


def test_masked_softmax_rejects_an_empty_row_instead_of_nan():
    mask = torch.tensor([[True, True], [False, False]])
    with pytest.raises(ValueError, match="row 1 has none"):
        masked_softmax(torch.zeros(2, 2), mask)
