"""minGRU and minLSTM: the parallel scan is the recurrence, step by step; the encoder keeps every
guarantee the LSTM has (padding never read, the summary where each direction stopped, step)."""

from __future__ import annotations

import pytest
import torch

from bistack.encoders import RecurrentEncoder
from bistack.kernels.min_cells_compiled import LinearScan
from bistack.min_cells import MinCell, candidate

CELLS = ["mingru", "minlstm"]


def plain_recurrence(cell: MinCell, inputs: torch.Tensor) -> torch.Tensor:
    """The cell as the paper writes it, one position after another, in linear space."""
    weight, bias = cell.gates.weight, cell.gates.bias
    state = inputs.new_zeros(inputs.size(0), cell.hidden_size)
    outputs = []
    for t in range(inputs.size(1)):
        parts = (inputs[:, t] @ weight.T + bias).chunk(3 if cell.cell == "minlstm" else 2, dim=-1)
        if cell.cell == "mingru":
            z = torch.sigmoid(parts[0])
            state = (1 - z) * state + z * candidate(parts[1])
        else:
            f, i = torch.sigmoid(parts[0]), torch.sigmoid(parts[1])
            state = f / (f + i) * state + i / (f + i) * candidate(parts[2])
        outputs.append(state)
    return torch.stack(outputs, dim=1)


@pytest.mark.parametrize("cell", CELLS)
def test_the_parallel_scan_is_the_recurrence_in_values_and_gradients(cell):
    torch.manual_seed(0)
    scan = MinCell(cell, 5, 4).double()
    inputs = (torch.randn(3, 17, 5, dtype=torch.float64) * 2).requires_grad_(True)
    parallel = scan(inputs)
    plain = plain_recurrence(scan, inputs)
    torch.testing.assert_close(parallel, plain, rtol=1e-10, atol=1e-12)
    weights = torch.randn_like(plain)
    grads = torch.autograd.grad((parallel * weights).sum(), [inputs, *scan.parameters()])
    expected = torch.autograd.grad((plain * weights).sum(), [inputs, *scan.parameters()])
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_compiled_cpu_kernel_is_the_log_space_scan(cell, dtype):
    torch.manual_seed(4)
    scan = MinCell(cell, 5, 6).to(dtype)
    pre = (scan.gates(torch.randn(3, 40, 5, dtype=dtype)) * 3).detach().requires_grad_(True)
    full = torch.full((3,), 40)
    compiled = LinearScan.apply(*scan.coefficients(pre), full, False)
    reference = scan.log_space_scan(pre)
    exact = dtype == torch.float64  # float32: the log-space scan rounds more than the kernel
    tolerance = {"rtol": 1e-10, "atol": 1e-12} if exact else {"rtol": 1e-4, "atol": 1e-4}
    torch.testing.assert_close(compiled, reference, **tolerance)
    weights = torch.randn_like(compiled)
    (got,) = torch.autograd.grad((compiled * weights).sum(), pre)
    (want,) = torch.autograd.grad((reference * weights).sum(), pre)
    torch.testing.assert_close(got, want, **tolerance)
    if dtype == torch.float64:
        keep, add = (c.detach()[:, :6].requires_grad_(True) for c in scan.coefficients(pre))
        for lengths, backward in [(torch.full((3,), 6), False), (torch.tensor([6, 2, 4]), True)]:
            assert torch.autograd.gradcheck(LinearScan.apply, (keep, add, lengths, backward))


@pytest.mark.parametrize("cell", CELLS)
def test_the_backward_scan_reads_each_sequence_from_its_own_end(cell):
    """Right to left within each length (0 at padding) is the forward scan of the sequence
    reversed: values and gradients, against the log-space scan of the reversed real tokens."""
    torch.manual_seed(5)
    scan = MinCell(cell, 5, 4).double()
    inputs = torch.randn(3, 9, 5, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([9, 4, 1])
    states = scan(inputs, lengths, backward=True)
    weights = torch.randn_like(states)
    (grad,) = torch.autograd.grad((states * weights).sum(), inputs)
    for row, length in enumerate(lengths.tolist()):
        real = inputs[row : row + 1, :length].detach().requires_grad_(True)
        alone = scan.log_space_scan(scan.gates(real.flip(1))).flip(1)
        torch.testing.assert_close(states[row, :length], alone[0], rtol=1e-10, atol=1e-12)
        assert torch.all(states[row, length:] == 0)
        (want,) = torch.autograd.grad((alone[0] * weights[row, :length]).sum(), real)
        torch.testing.assert_close(grad[row, :length], want[0], rtol=1e-9, atol=1e-11)
        assert torch.all(grad[row, length:] == 0)  # padding never reached a real state


@pytest.mark.parametrize("cell", CELLS)
def test_other_devices_eager_scan_gives_what_the_cpu_kernel_gives(cell, monkeypatch):
    import bistack.min_cells as min_cells

    torch.manual_seed(6)
    encoder = RecurrentEncoder(5, 4, cell=cell, num_layers=2, residual=True).double()
    inputs = torch.randn(3, 8, 5, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([8, 3, 5])
    results = []
    for compiled in (True, False):
        monkeypatch.setattr(min_cells, "runs_compiled", lambda _, on=compiled: on)
        out = encoder(inputs, lengths=lengths)
        (grad,) = torch.autograd.grad(out.states.sum() + out.summary.sum(), inputs)
        results.append((out.states, out.summary, grad))
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("cell", CELLS)
def test_the_scan_stays_exact_over_512_positions_in_float32(cell):
    torch.manual_seed(1)
    scan = MinCell(cell, 8, 6)
    inputs = torch.randn(2, 512, 8) * 3
    with torch.no_grad():
        plain = plain_recurrence(scan.double(), inputs.double())
        parallel = scan.float()(inputs)
        log_space = scan.log_space_scan(scan.gates(inputs))
    for result in (parallel, log_space):  # compiled, and the log-space scan of other devices
        assert torch.isfinite(result).all()
        torch.testing.assert_close(result.double(), plain, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("residual", [False, True])
def test_step_gives_the_states_forward_gives(cell, residual):
    torch.manual_seed(2)
    encoder = RecurrentEncoder(5, 4, cell=cell, bidirectional=False, num_layers=3,
                               residual=residual, dropout=0.3).eval()  # fmt: skip
    inputs = torch.randn(2, 9, 5)
    whole = encoder(inputs, lengths=torch.tensor([9, 9])).states
    state = None
    for t in range(9):
        out, state = encoder.step(inputs[:, t], state)
        torch.testing.assert_close(out, whole[:, t], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", CELLS)
def test_the_backward_direction_starts_at_each_sequence_own_end(cell):
    """Its summary half is its state after reading the real tokens last to first."""
    torch.manual_seed(3)
    encoder = RecurrentEncoder(5, 4, cell=cell, bidirectional=True).eval()
    inputs = torch.randn(3, 8, 5)
    lengths = torch.tensor([8, 3, 5])
    out = encoder(inputs, lengths=lengths)
    backward = encoder.layers[0].directions[1]
    forward = encoder.layers[0].directions[0]
    for row, length in enumerate(lengths.tolist()):
        real = inputs[row : row + 1, :length]
        torch.testing.assert_close(
            out.summary[row, 4:], backward.log_space_scan(backward.gates(real.flip(1)))[0, -1]
        )
        torch.testing.assert_close(out.summary[row, :4], forward(real)[0, -1])


def test_a_bidirectional_min_cell_encoder_cannot_stream():
    encoder = RecurrentEncoder(5, 4, cell="mingru", bidirectional=True)
    with pytest.raises(ValueError, match="cannot run one token at a time"):
        encoder.step(torch.randn(2, 5))
