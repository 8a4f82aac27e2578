"""train.accumulate_batches: the optimizer steps once every N batches, on the mean of their
gradients, exactly as one step over their union would when the batches are the same size."""

from __future__ import annotations

import torch
from lightning_fabric import Fabric

from bistack.runs.epoch import EpochPlan, run_epoch


class Rows:
    """A loop task over fixed rows of a regression: each batch's loss is its mean squared
    error."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor) -> None:
        self.inputs, self.targets = inputs, targets

    def collate(self, indices):
        return Batch(self.inputs[indices], self.targets[indices])


class Batch:
    def __init__(self, inputs, targets):
        self.inputs, self.targets = inputs, targets

    def to(self, device):
        return Batch(self.inputs.to(device), self.targets.to(device))


class Regression(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, batch: Batch) -> torch.Tensor:
        return ((self.linear(batch.inputs).squeeze(1) - batch.targets) ** 2).mean()


def trained(batches, accumulate):
    fabric = Fabric(accelerator="cpu", devices=1)
    model = Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for group in optimizer.param_groups:
        group["base_lr"] = group["lr"]
    wrapped, optimizer = fabric.setup(model, optimizer)
    generator = torch.Generator().manual_seed(1)
    task = Rows(torch.randn(12, 3, generator=generator), torch.randn(12, generator=generator))
    steps = []
    step = optimizer.step
    optimizer.step = lambda *a, **k: (steps.append(1), step(*a, **k))[1]
    run_epoch(fabric, wrapped, optimizer, task, batches, EpochPlan(accumulate=accumulate))
    return model.linear.weight.detach().clone(), len(steps)


def test_two_batches_a_step_equal_one_batch_of_both():
    halves = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    wholes = [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
    accumulated, accumulated_steps = trained(halves, accumulate=2)
    whole, whole_steps = trained(wholes, accumulate=1)
    assert accumulated_steps == whole_steps == 2
    torch.testing.assert_close(accumulated, whole)
    single, single_steps = trained(halves, accumulate=1)
    assert single_steps == 4 and not torch.allclose(single, whole)


def test_a_last_partial_step_is_taken_on_its_own_batches():
    batches = [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    _, steps = trained(batches, accumulate=2)
    assert steps == 2  # batches 1-2, then batch 3 alone
    partial, _ = trained(batches, accumulate=2)
    expected, _ = trained([[0, 1, 2, 3, 4, 5], [6, 7, 8]], accumulate=1)
    torch.testing.assert_close(partial, expected)


def test_with_a_loss_scaler_gradients_are_clipped_by_an_unfused_optimizer():
    """float16 on a GPU scales the loss; clipping unscales first, which a fused optimizer
    refuses (it unscales inside its step). A CPU scaler stands in for the GPU's here."""
    from lightning_fabric.plugins.precision import MixedPrecision

    from bistack.config import OptimizerConfig
    from bistack.runs.optimizers import optimizer_for

    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    fabric = Fabric(
        accelerator="cpu", devices=1, plugins=[MixedPrecision("16-mixed", "cpu", scaler)]
    )
    model = Regression()
    optimizer = optimizer_for(fabric, OptimizerConfig(name="adam", lr=0.1), model)
    assert not optimizer.defaults["fused"] and optimizer.defaults["foreach"] is True
    wrapped, optimizer = fabric.setup(model, optimizer)
    generator = torch.Generator().manual_seed(1)
    task = Rows(torch.randn(12, 3, generator=generator), torch.randn(12, generator=generator))
    before = model.linear.weight.detach().clone()
    run_epoch(fabric, wrapped, optimizer, task, [[0, 1, 2], [3, 4, 5]], EpochPlan(grad_clip=1.0))
    assert not torch.equal(model.linear.weight, before)
    plain = Fabric(accelerator="cpu", devices=1)
    assert optimizer_for(plain, OptimizerConfig(name="adam"), Regression()).defaults["fused"]
