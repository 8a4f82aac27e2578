"""train.weight_average: dev is scored, and the best model saved, with an exponential moving
average of the trained weights in place, while training goes on from the weights it had."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bistack import tasks
from bistack.config import OptimizerConfig, TrainConfig
from bistack.errors import ConfigError
from bistack.metrics.dev import Evaluation
from bistack.runs.averaging import WeightAverage
from bistack.runs.loop import fit, start_run
from bistack.taggers.models.tagger import Tagger
from tests.conftest import tiny_config, tiny_sentences, train_quietly, write_conll


class Regression(torch.nn.Module):
    """A linear model under a frozen layer; ``forward(batch)`` is its mean squared error."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen = torch.nn.Linear(3, 3)
        self.frozen.requires_grad_(False)
        self.linear = torch.nn.Linear(3, 1)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        inputs, targets = batch[:, :3], batch[:, 3]
        return ((self.linear(self.frozen(inputs)).squeeze(-1) - targets) ** 2).mean()


def trained(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_the_average_is_the_exponential_moving_average_of_the_steps():
    model = Regression()
    frozen = model.frozen.weight.detach().clone()
    average = WeightAverage(model, decay=0.9)
    expected = trained(model)
    for step in range(30):
        with torch.no_grad():
            for parameter in model.linear.parameters():
                parameter.add_(torch.randn_like(parameter))
        average.update()
        decay = min(0.9, (1 + step) / (10 + step))
        expected = {n: decay * expected[n] + (1 - decay) * p for n, p in trained(model).items()}
    tensors, updates = average.state()
    assert updates == 30
    assert tensors.keys() == {"linear.weight", "linear.bias"}  # the frozen layer is not averaged
    for name, value in expected.items():
        torch.testing.assert_close(tensors[name], value)
    assert model.frozen.weight.equal(frozen)


def test_an_update_is_one_foreach_call_whatever_the_number_of_parameters():
    model = torch.nn.Sequential(*(torch.nn.Linear(4, 4) for _ in range(12)))  # 24 tensors
    average = WeightAverage(model, decay=0.9)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiled:
        average.update()
    events = profiled.events()
    assert [e.name for e in events].count("aten::_foreach_lerp_") == 1
    # On the CPU the foreach call runs a lerp a tensor inside it (a GPU fuses them); none
    # is called on its own.
    inner = [e for e in events if e.name == "aten::lerp_"]
    assert all(
        e.cpu_parent is not None and e.cpu_parent.name == "aten::_foreach_lerp_" for e in inner
    )


def test_the_average_stands_in_for_the_weights_and_gives_them_back_bit_for_bit():
    model = Regression()
    average = WeightAverage(model, decay=0.5)
    with torch.no_grad():
        model.linear.weight.add_(1.0)
    average.update()
    weights = trained(model)
    with average.applied():
        assert model.linear.weight.equal(average.state()[0]["linear.weight"])
        assert not model.linear.weight.equal(weights["linear.weight"])
    assert all(p.equal(weights[n]) for n, p in trained(model).items())
    with pytest.raises(RuntimeError), average.applied():
        raise RuntimeError("an evaluation that fails")
    assert all(p.equal(weights[n]) for n, p in trained(model).items())


class Task:
    """A loop task that records what dev saw and what was saved, epoch by epoch."""

    def __init__(self, model: Regression) -> None:
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn(64, 3, generator=generator)
        targets = inputs @ torch.tensor([1.0, -2.0, 0.5]) + 0.3
        self.rows = torch.cat([inputs, targets[:, None]], dim=1)
        self.model = model
        self.evaluated: list[dict[str, torch.Tensor]] = []
        self.saved: list[dict[str, torch.Tensor]] = []

    def train_lengths(self) -> list[int]:
        return [1] * len(self.rows)

    def collate(self, indices: list[int]) -> torch.Tensor:
        return self.rows[indices]

    def evaluate(self) -> Evaluation:
        self.evaluated.append(trained(self.model))
        score = float(len(self.evaluated))  # every epoch a new best: each one is saved
        return Evaluation(score, {"score": score}, f"dev {score}")

    def save_weights(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.saved.append(trained(self.model))


@pytest.mark.parametrize("decay", [0.0, 0.95])
def test_dev_and_the_saved_model_see_the_average_and_training_goes_on_from_its_weights(
    tmp_path, decay
):
    torch.manual_seed(0)
    model = Regression()
    task = Task(model)
    run = start_run(tmp_path / "run", 1, devices=1, strategy="auto", accelerator="cpu")
    settings = TrainConfig(batch_size=8, max_epochs=3, patience=3, weight_average=decay)
    fit(run, model, task, settings, OptimizerConfig(name="sgd", lr=0.05), progress=False)
    run.directory.close()

    assert len(task.evaluated) == len(task.saved) == 3  # every epoch a best, saved as scored
    for saved, evaluated in zip(task.saved, task.evaluated, strict=True):
        assert all(saved[n].equal(evaluated[n]) for n in saved)
    last_evaluated, final = task.evaluated[-1], trained(model)
    if decay == 0.0:  # off: dev scores the weights of the last step
        assert all(last_evaluated[n].equal(final[n]) for n in final)
    else:  # on: dev scores weights no step had, and training keeps its own
        assert not last_evaluated["linear.weight"].equal(final["linear.weight"])
        checkpoint = load_file(tmp_path / "run" / "checkpoint.safetensors")
        for name, value in last_evaluated.items():
            assert checkpoint[f"average.{name}"].equal(value)
            assert checkpoint[f"model.{name}"].equal(final[name])


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("averaged")
    return (
        write_conll(root / "train.txt", tiny_sentences(120, seed=0)),
        write_conll(root / "dev.txt", tiny_sentences(30, seed=1)),
    )


def test_a_tagger_trained_with_a_weight_average_saves_what_dev_scored(data, tmp_path):
    """The best model on disk is the average dev scored: loading it and scoring dev gives the
    F1 the run logged for its best epoch."""
    # Two short epochs at a low rate: far from dev's ceiling, where the average and the last
    # step's weights score differently.
    settings = tiny_config(
        *data, train={"max_epochs": 2, "weight_average": 0.9}, optimizer={"lr": 0.003}
    )
    config = tasks.config_from_dict(settings)
    model_dir = train_quietly(config, tmp_path / "run")
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    best = max(float(row["dev_f1"]) for row in rows)
    assert 0 < best < 100
    assert Tagger.load(model_dir).evaluate(data[1]).micro.f1 == pytest.approx(best, abs=1e-6)


def test_a_weight_average_of_one_is_a_clear_error(data, tmp_path):
    settings = tiny_config(*data, train={"weight_average": 1.0})
    with pytest.raises(ConfigError, match=r"train.weight_average must be >= 0.0 and <= 0.9999"):
        tasks.config_from_dict(settings)
