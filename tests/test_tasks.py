"""The task table is the only dispatch: a kind registered from outside bistack (here, from this
test) trains, saves, loads, evaluates and predicts through the ``bistack`` command line without
any edit to bistack. The toy kind counts a text's whitespace tokens (a kind whose input is not a
text at all is ``tests/kinds/span_classifier``)."""

from __future__ import annotations

import json
import math
import random
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
import torch
import yaml
from torch import Tensor, nn

from bistack import predictor, tasks
from bistack.cards import Card
from bistack.cli import main
from bistack.config import ExperimentConfig, OptimizerConfig, SplitConfig, TrainConfig
from bistack.errors import ConfigError, ModelFileError
from bistack.files.modeldir import save_metadata, save_weights
from bistack.metrics.dev import Evaluation, Metric
from bistack.metrics.text import Scores
from bistack.models.saved import SavedKind, SavedModel
from bistack.runs.driver import Prepared
from bistack.runs.loop import Run

KIND = "token_counter"


@dataclass
class TokenCounterConfig(ExperimentConfig):
    kind: Literal["token_counter"] = "token_counter"
    data: SplitConfig = field(default_factory=SplitConfig)
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(name="adam", lr=0.1, lr_decay=0.0)
    )
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_epochs=60, patience=60))


@dataclass(frozen=True)
class CountBatch:
    counts: Tensor  # (batch_size, 1) the feature: tokens per text
    targets: Tensor | None = None

    def to(self, device: torch.device | str) -> CountBatch:
        targets = None if self.targets is None else self.targets.to(device)
        return CountBatch(self.counts.to(device), targets)


class CountNetwork(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)

    def forward(self, batch: CountBatch) -> Tensor:
        return nn.functional.mse_loss(self.linear(batch.counts), batch.targets)


def counts(texts: Sequence[str]) -> Tensor:
    return torch.tensor([[float(len(t.split()))] for t in texts])


@dataclass(frozen=True)
class Count:
    text: str
    tokens: float

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "tokens": self.tokens}


class RMSE(Scores):
    def __str__(self) -> str:
        return f"RMSE {self['rmse']:.3f} over {self['examples']} texts"


def read_lines(path: str) -> list[str]:
    return [line for line in Path(path).read_text().splitlines() if line.strip()]


class TokenCounter(SavedKind):
    KIND = KIND
    CONFIG = TokenCounterConfig

    def __init__(self, network: CountNetwork, config: TokenCounterConfig) -> None:
        self.network = network
        self.config = config

    @classmethod
    def from_saved(cls, saved: SavedModel) -> TokenCounter:
        return cls(saved.weights_into(CountNetwork()), saved.config)

    @property
    def labels(self) -> list[str]:
        return ["tokens"]

    def save(self, path: str | Path) -> None:
        self.save_metadata(path)
        self.save_weights(path)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(path, KIND, self.config.to_dict(), {})

    def save_weights(self, path: str | Path) -> None:
        save_weights(path, self.network)

    @torch.inference_mode()
    def predict(self, texts: Sequence[str]) -> list[Count]:
        values = self.network.linear(counts(texts))[:, 0].tolist()
        return [Count(text, value) for text, value in zip(texts, values, strict=True)]

    def describe(self) -> dict[str, Any]:
        return {"labels": self.labels}

    def evaluate(self, path: str | Path) -> RMSE:
        texts = read_lines(str(path))
        predicted = [c.tokens for c in self.predict(texts)]
        gold = [len(t.split()) for t in texts]
        error = math.sqrt(
            sum((p - g) ** 2 for p, g in zip(predicted, gold, strict=True)) / len(texts)
        )
        return RMSE({"rmse": error, "examples": len(texts)})


class CountTask:
    def __init__(self, model: TokenCounter, train: list[str], dev: list[str], run: Run) -> None:
        self.model, self.train, self.dev, self.run = model, train, dev, run

    def train_lengths(self) -> Sequence[int]:
        return [1] * len(self.train)

    def collate(self, indices: list[int]) -> CountBatch:
        chosen = counts([self.train[i] for i in indices])
        return CountBatch(chosen, chosen.clone())

    def evaluate(self) -> Evaluation:
        predicted = torch.tensor([c.tokens for c in self.model.predict(self.dev)])
        error = float((predicted - counts(self.dev)[:, 0]).pow(2).mean().sqrt())
        return Evaluation(-error, {"dev_rmse": error}, f"dev RMSE {error:.3f}")

    def save_weights(self, directory: Path) -> None:
        self.model.save_weights(directory)


def prepare(config: TokenCounterConfig, run: Run) -> Prepared:
    train, dev = read_lines(config.data.train), read_lines(str(config.data.dev))
    model = TokenCounter(CountNetwork(), config)
    return Prepared(model, model.network, CountTask(model, train, dev, run), "token counts")


@pytest.fixture
def token_counter() -> Iterator[Card]:
    task = tasks.register(
        Card(
            KIND,
            "a token counter",
            config=TokenCounterConfig,
            recipe=prepare,
            loader=TokenCounter,
            metric=Metric("dev_rmse", "dev RMSE", higher_is_better=False),
        )
    )
    yield task
    del tasks.TASKS[KIND]


def write_texts(path: Path, count: int, seed: int) -> Path:
    rng = random.Random(seed)
    words = ["a", "bb", "ccc", "dd", "e"]
    lines = [" ".join(rng.choices(words, k=rng.randint(1, 9))) for _ in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_kind_registered_from_outside_trains_loads_evaluates_and_predicts(
    token_counter, tmp_path, capsys
):
    train = write_texts(tmp_path / "train.txt", 64, 0)
    dev = write_texts(tmp_path / "dev.txt", 16, 1)
    config = {"kind": KIND, "data": {"train": str(train), "dev": str(dev)}}
    path = tmp_path / "counter.yaml"
    path.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    assert main(["train", str(path), "--output", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "token counts; 2 trained parameters" in out and "best dev RMSE" in out
    assert json.loads((run / "model" / "config.json").read_text())["kind"] == KIND

    assert main(["evaluate", str(run / "model"), str(dev), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["examples"] == 16 and scores["rmse"] < 0.5
    assert main(["evaluate", str(run / "model"), str(dev)]) == 0
    assert capsys.readouterr().out.startswith("RMSE ")

    assert main(["predict", str(run / "model"), "a b c d e f", "x"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in records] == ["a b c d e f", "x"]
    assert records[0]["tokens"] == pytest.approx(6, abs=0.5)
    assert records[1]["tokens"] == pytest.approx(1, abs=0.5)
    # What the kind does not offer is refused by the table, not by code that knows the kind.
    assert main(["predict", str(run / "model"), "a", "--format", "conll"]) == 2
    assert "--format conll is not for a token counter" in capsys.readouterr().err
    assert main(["explain", str(run / "model"), "a"]) == 2
    assert main(["ladder", str(path), "--output", str(tmp_path / "l")]) == 2
    assert "not a token counter" in capsys.readouterr().err
    assert type(predictor.load_model(run / "model")) is TokenCounter


def test_an_unknown_kind_is_an_error_that_lists_the_known_ones(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"unknown model kind 'nope' \(known: classifier, "):
        tasks.config_from_dict({"kind": "nope"})
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"kind": "nope", "config": {"kind": "nope"}}))
    with pytest.raises(ModelFileError, match="holds a model of kind 'nope', which this bistack"):
        predictor.load_model(model)
    assert main(["predict", str(model), "text"]) == 2
    assert "kind 'nope'" in capsys.readouterr().err


def test_every_kind_in_the_table_has_its_config_kind_and_loader_kind():
    for kind, task in tasks.TASKS.items():
        assert kind in typing.get_args(typing.get_type_hints(task.config_class)["kind"]), kind
        assert kind == task.loader_class.KIND


def test_a_kind_registered_twice_is_an_error():
    with pytest.raises(ValueError, match="already registered"):
        tasks.register(tasks.TASKS["tagger"])
