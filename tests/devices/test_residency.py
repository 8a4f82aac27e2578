"""The wait counter itself (:mod:`tests.devices.residency`): each kind of wait a GPU would have,
injected into a few lines on marked tensors, is counted with its line; what a GPU does without
waiting is not. Were one of these kinds missed, the training and prediction tests that rely on
the counter could not fail on it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.devices.residency import DeviceResidency, device_residency, mark

HOST = torch.device("cpu")  # as a module may name the host


def on_device(*shape: int) -> torch.Tensor:
    return mark(torch.arange(float(np.prod(shape))).reshape(shape))


READS = {
    ".item()": lambda x: x.sum().item(),
    ".cpu()": lambda x: x.cpu(),
    ".to('cpu')": lambda x: x.to("cpu"),
    ".to(torch.device('cpu'))": lambda x: x.to(torch.device("cpu")),
    "copy_ into a host tensor": lambda x: torch.empty(x.shape).copy_(x),
    "bincount": lambda x: torch.bincount(x.long().flatten()),
    "one-argument where": lambda x: torch.where(x > 2),
    "nonzero": lambda x: (x > 2).nonzero(),
    "a boolean mask": lambda x: x[x > 2],
    ".to(HOST), a module's constant": lambda x: x.to(HOST),
    "one_hot without num_classes": lambda x: torch.nn.functional.one_hot(x.long().flatten()),
}
COPIES = {
    "copy_ from a host tensor": lambda x: x.copy_(torch.ones(x.shape)),
    "a host index tensor": lambda x: x[torch.tensor([0, 1])],
    "index_select by a host index": lambda x: x.index_select(0, torch.tensor([1])),
    ".to(device) blocking": lambda _: torch.ones(2).to("meta"),
    "a Python list as an index": lambda x: x[[0, 2]],
    "a Python list in an index": lambda x: x[:, [1]],
    "new_tensor": lambda x: x.new_tensor([1.0, 2.0]),
}
NO_WAIT = {
    "copy_ from a host tensor without blocking": lambda x: x.copy_(torch.ones(x.shape), True),
    "a device index tensor": lambda x: x[mark(torch.tensor([0, 1]))],
    "a move between devices": lambda x: x.to("meta"),
    "arithmetic": lambda x: (x * 2).sum(),
    "a slice and an integer": lambda x: x[1:, 0],
    ".to(x.device), the tensor's own device": lambda x: x.to(x.device),
    "one_hot with num_classes": lambda x: torch.nn.functional.one_hot(x.long().flatten(), 6),
}


@pytest.mark.parametrize("kind", list(READS))
def test_each_kind_of_read_is_counted(kind):
    with DeviceResidency() as residency:
        READS[kind](on_device(3, 2))
    assert sum(residency.reads.values()) == 1, dict(residency.reads)


@pytest.mark.parametrize("kind", list(COPIES))
def test_each_kind_of_blocking_copy_is_counted(kind):
    with DeviceResidency() as residency:
        COPIES[kind](on_device(3, 2))
    assert sum(residency.copies.values()) == 1, dict(residency.copies)


@pytest.mark.parametrize("kind", list(NO_WAIT))
def test_what_waits_for_nothing_is_not_counted(kind):
    with DeviceResidency() as residency:
        NO_WAIT[kind](on_device(3, 2))
    assert not residency.reads and not residency.copies


class Reading(torch.autograd.Function):
    """An autograd Function whose backward reads its gradient (as a CRF scan might)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        grad.sum().item()
        return grad * 2


def test_a_read_inside_a_backward_pass_is_counted(monkeypatch):
    monkeypatch.setattr(Reading, "__module__", "bistack.kernels.injected")  # one of bistack's
    x = torch.ones(3, requires_grad=True)
    with device_residency(monkeypatch) as residency:
        Reading.apply(mark(x)).sum().backward()
    assert sum(residency.reads.values()) == 1, dict(residency.reads)


def test_a_read_in_a_gradient_hook_is_counted(monkeypatch):
    """A hook on a gradient runs inside the backward pass, where no function mode runs: the
    counter enters it into the mode, its gradient on the device."""
    x = torch.ones(3, requires_grad=True)
    with device_residency(monkeypatch) as residency:
        y = mark(x) * 2
        y.register_hook(lambda grad: grad.sum().item() and None)
        y.sum().backward()
    assert sum(residency.reads.values()) == 1, dict(residency.reads)
