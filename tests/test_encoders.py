"""Proofs that the seed's encoder pitfalls cannot happen in RecurrentEncoder."""

import itertools

import pytest
import torch
from torch import nn

from bistack import encoders
from bistack.encoders import RecurrentEncoder, final_state_summary


def configs(cells: list[str]) -> list:
    return [
        pytest.param(
            cell, bi, layers, residual, id=f"{cell}-{'bi' if bi else 'uni'}-{layers}-{res}"
        )
        for cell, bi, layers, residual in itertools.product(
            cells, [False, True], [1, 2, 3], [False, True]
        )
        for res in ["residual" if residual else "plain"]
    ]


CONFIGS = configs(["lstm", "gru"])  # the cells PyTorch's packed path also runs
ALL_CONFIGS = configs(["lstm", "gru", "mingru", "minlstm"])


def make_encoder(cell="lstm", bidirectional=True, num_layers=2, residual=False, input_size=5):
    torch.manual_seed(0)
    encoder = RecurrentEncoder(
        input_size,
        4,
        cell=cell,
        bidirectional=bidirectional,
        num_layers=num_layers,
        residual=residual,
        dropout=0.3,
    )
    return encoder.eval()


@pytest.mark.parametrize(("cell", "bidirectional", "num_layers", "residual"), ALL_CONFIGS)
def test_padding_invariance_beside_a_five_times_longer_sequence(
    cell, bidirectional, num_layers, residual
):
    encoder = make_encoder(cell, bidirectional, num_layers, residual)
    short = torch.randn(1, 4, 5)
    alone = encoder(short, lengths=torch.tensor([4]))
    batch = torch.randn(2, 20, 5)
    batch[0] = 0.0
    batch[0, :4] = short[0]
    batch[0, 4:] = 7.0  # loud padding: must not leak into the short sequence
    together = encoder(batch, lengths=torch.tensor([4, 20]))
    torch.testing.assert_close(together.states[0, :4], alone.states[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(together.summary[0], alone.summary[0], atol=1e-6, rtol=0)
    assert together.states[0, 4:].abs().max() == 0


def test_unpacked_lstm_pollutes_the_backward_direction_and_the_encoder_does_not():
    torch.manual_seed(0)
    lstm = nn.LSTM(5, 4, batch_first=True, bidirectional=True).eval()
    encoder = RecurrentEncoder(5, 4, bidirectional=True).eval()
    encoder.rnn.load_state_dict(lstm.state_dict())
    short = torch.randn(1, 4, 5)
    padded = torch.cat([short, torch.zeros(1, 16, 5)], dim=1)
    alone, _ = lstm(short)
    naive, _ = lstm(padded)
    # Forward direction reads the same prefix; backward started on 16 pads.
    torch.testing.assert_close(naive[0, :4, :4], alone[0, :, :4])
    assert (naive[0, :4, 4:] - alone[0, :, 4:]).abs().max() > 1e-3
    packed = encoder(padded, lengths=torch.tensor([4]))
    torch.testing.assert_close(packed.states[0, :4], alone[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("residual", [False, True])
def test_output_keeps_padded_length_when_longest_sequence_is_shorter(residual):
    encoder = make_encoder(residual=residual)
    out = encoder(torch.randn(3, 9, 5), lengths=torch.tensor([2, 5, 4]))
    assert out.states.shape == (3, 9, 8)
    assert out.mask.shape == (3, 9)
    assert encoder.output_size == 8


@pytest.mark.parametrize(("cell", "bidirectional", "num_layers", "residual"), ALL_CONFIGS)
def test_summary_is_forward_last_real_state_and_backward_first_state(
    cell, bidirectional, num_layers, residual
):
    encoder = make_encoder(cell, bidirectional, num_layers, residual)
    lengths = torch.tensor([3, 7, 1, 5])
    out = encoder(torch.randn(4, 7, 5), lengths=lengths)
    hidden = encoder.hidden_size
    for b, length in enumerate(lengths.tolist()):
        expected = out.states[b, length - 1, :hidden]
        if bidirectional:
            expected = torch.cat([expected, out.states[b, 0, hidden:]])
        torch.testing.assert_close(out.summary[b], expected)


def test_summary_differs_from_h_n_last_which_is_backward_only():
    torch.manual_seed(0)
    lstm = nn.LSTM(5, 4, num_layers=2, batch_first=True, bidirectional=True)
    inputs = torch.randn(3, 6, 5)
    packed = nn.utils.rnn.pack_padded_sequence(
        inputs, torch.tensor([6, 4, 2]), batch_first=True, enforce_sorted=False
    )
    _, (h_n, _) = lstm(packed)
    summary = final_state_summary(h_n, num_layers=2, bidirectional=True)
    assert summary.shape == (3, 8)
    torch.testing.assert_close(summary[:, 4:], h_n[-1])  # h_n[-1] is only the backward half
    assert not torch.allclose(summary[:, :4], h_n[-1])


def test_plain_summary_is_h_n_of_the_last_layer():
    encoder = make_encoder(num_layers=3)
    inputs = torch.randn(2, 5, 5)
    packed = nn.utils.rnn.pack_padded_sequence(
        inputs, torch.tensor([5, 3]), batch_first=True, enforce_sorted=False
    )
    _, (h_n, _) = encoder.rnn(packed)
    out = encoder(inputs, lengths=torch.tensor([5, 3]))
    torch.testing.assert_close(out.summary, torch.cat([h_n[-2], h_n[-1]], dim=-1))


def test_residual_states_are_the_seed_residual_stack():
    encoder = make_encoder(residual=True, num_layers=2)
    inputs = torch.randn(2, 5, 5)
    lengths = torch.tensor([5, 3])
    out = encoder(inputs, lengths=lengths)
    # Recompute layer by layer with plain packing.
    x = inputs
    for rnn, projection in zip(encoder.layers, encoder.projections, strict=True):
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False
        )
        y, _ = rnn(packed)
        y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=5)
        x = y + projection(x)
    x = x * out.mask.unsqueeze(-1)
    torch.testing.assert_close(out.states, x)


def test_residual_projects_only_where_sizes_differ():
    encoder = RecurrentEncoder(5, 4, num_layers=3, residual=True)
    kinds = [type(p).__name__ for p in encoder.projections]
    assert kinds == ["Linear", "Identity", "Identity"]
    same = RecurrentEncoder(8, 4, num_layers=2, residual=True)
    assert [type(p).__name__ for p in same.projections] == ["Identity", "Identity"]


def test_mask_and_lengths_give_the_same_result():
    encoder = make_encoder()
    inputs = torch.randn(2, 6, 5)
    lengths = torch.tensor([6, 3])
    by_lengths = encoder(inputs, lengths=lengths)
    by_mask = encoder(inputs, mask=by_lengths.mask)
    torch.testing.assert_close(by_lengths.states, by_mask.states)


@pytest.mark.parametrize(("cell", "bidirectional", "num_layers", "residual"), ALL_CONFIGS)
def test_gradients_reach_every_parameter(cell, bidirectional, num_layers, residual):
    encoder = make_encoder(cell, bidirectional, num_layers, residual).train()
    out = encoder(torch.randn(3, 6, 5), lengths=torch.tensor([6, 2, 4]))
    (out.states.sum() + out.summary.sum()).backward()
    for name, parameter in encoder.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"inputs": torch.randn(2, 5)},
            "inputs must be 3-D (batch_size, seq_len, input_size), got shape (2, 5)",
        ),
        ({"inputs": torch.randn(2, 4, 3)}, "inputs have 3 features, encoder expects 5"),
        ({"lengths": torch.tensor([4, 5])}, "lengths must be <= seq_len=4, got 5"),
        ({"lengths": torch.tensor([4, 0])}, "lengths must be >= 1, got 0"),
        ({"lengths": torch.tensor([4])}, "lengths must have shape (2,), got (1,)"),
        (
            {"lengths": torch.tensor([4.0, 2.0])},
            "lengths must be an integer tensor, got torch.float32",
        ),
        (
            {"lengths": None, "mask": torch.ones(2, 4)},
            "mask must be a bool tensor (True = real token), got torch.float32",
        ),
        (
            {"lengths": None, "mask": torch.ones(2, 3, dtype=torch.bool)},
            "mask shape (2, 3) does not match input shape (2, 4)",
        ),
        ({"lengths": None}, "give exactly one of lengths or mask"),
    ],
)
def test_bad_input_raises_exact_messages(kwargs, message):
    encoder = make_encoder()
    arguments = {"inputs": torch.randn(2, 4, 5), "lengths": torch.tensor([4, 2])} | kwargs
    with pytest.raises(ValueError) as error:
        encoder(**arguments)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cell": "rnn"}, "unknown cell: 'rnn' (expected 'lstm', 'gru', 'mingru' or 'minlstm')"),
        ({"num_layers": 0}, "num_layers must be >= 1, got 0"),
        ({"dropout": 1.5}, "dropout must be in [0, 1), got 1.5"),
    ],
)
def test_bad_construction_raises_exact_messages(kwargs, message):
    with pytest.raises(ValueError) as error:
        RecurrentEncoder(5, 4, **kwargs)
    assert str(error.value) == message


def packed_reference(encoder: RecurrentEncoder, inputs, lengths):
    """The same parameters run through PyTorch's packed path, layer by layer where residual."""

    def packed_run(rnn, x):
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False
        )
        y, _ = rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.size(1))[0]

    if not encoder.residual:
        return packed_run(encoder.rnn, inputs)
    x = inputs
    for rnn, projection in zip(encoder.layers, encoder.projections, strict=True):
        x = packed_run(rnn, x) + projection(x)
    mask = torch.arange(inputs.size(1)) < lengths.unsqueeze(1)
    return x * mask.unsqueeze(-1)


@pytest.mark.parametrize(("cell", "bidirectional", "num_layers", "residual"), CONFIGS)
def test_equals_the_packed_pytorch_rnn_in_values_and_gradients(
    cell, bidirectional, num_layers, residual
):
    encoder = make_encoder(cell, bidirectional, num_layers, residual)
    lengths = torch.tensor([7, 2, 5, 1, 7])
    inputs = torch.randn(5, 9, 5)  # wider than the longest sequence
    upstream = torch.randn(5, 9, encoder.output_size)

    ours_in = inputs.clone().requires_grad_()
    ours = encoder(ours_in, lengths=lengths).states
    (ours * upstream).sum().backward()
    ours_grads = [p.grad.clone() for p in encoder.parameters()]
    encoder.zero_grad()

    ref_in = inputs.clone().requires_grad_()
    reference = packed_reference(encoder, ref_in, lengths)
    (reference * upstream).sum().backward()

    torch.testing.assert_close(ours, reference, atol=1e-6, rtol=0)
    torch.testing.assert_close(ours_in.grad, ref_in.grad, atol=1e-6, rtol=0)
    for ours_grad, parameter in zip(ours_grads, encoder.parameters(), strict=True):
        torch.testing.assert_close(ours_grad, parameter.grad, atol=1e-5, rtol=0)


def test_the_recurrent_encoder_keeps_the_encoder_contract():
    from bistack.encoders import SequenceEncoder

    encoder = RecurrentEncoder(4, 3, bidirectional=False)
    assert isinstance(encoder, SequenceEncoder)
    assert encoder.output_size == 3 and encoder.bidirectional is False


@pytest.mark.parametrize(("cell", "bidirectional", "num_layers", "residual"), CONFIGS)
@pytest.mark.parametrize("given", ["lengths", "mask"])
def test_the_gpu_path_forced_on_the_cpu_equals_the_cpu_path(
    cell, bidirectional, num_layers, residual, given, monkeypatch
):
    """On CUDA the encoder runs its modules whole (cuDNN's own layout): over packed sequences
    (sorted on the host, the order copied without waiting), or over the padded batch where it
    reads one direction; the states, summaries and gradients are the CPU path's, whether the
    lengths come on the host or as a mask. Ties in length keep their order."""
    encoder = make_encoder(cell, bidirectional, num_layers, residual)
    lengths = torch.tensor([7, 2, 5, 1, 7, 2])
    inputs = torch.randn(6, 9, 5, requires_grad=True)
    mask = torch.arange(9) < lengths.unsqueeze(1)
    ways = {"lengths": {"lengths": lengths}, "mask": {"mask": mask}}[given]
    on_cpu = encoder(inputs, **ways)
    (on_cpu.states.sum() + on_cpu.summary.sum()).backward()
    expected = inputs.grad
    inputs.grad = None
    monkeypatch.setattr(encoders, "reads_packed", lambda _: True)
    whole = encoder(inputs, **ways)
    (whole.states.sum() + whole.summary.sum()).backward()
    torch.testing.assert_close(whole.states, on_cpu.states, atol=1e-6, rtol=0)
    torch.testing.assert_close(whole.summary, on_cpu.summary, atol=1e-6, rtol=0)
    torch.testing.assert_close(inputs.grad, expected, atol=1e-5, rtol=0)
