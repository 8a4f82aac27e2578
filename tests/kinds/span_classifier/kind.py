"""The span classifier: its input, config, network, model, recipe and card."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from bistack.cards import JSONL, Card, OutputFormat, PredictOption
from bistack.config import ExperimentConfig, OptimizerConfig, SplitConfig, TrainConfig
from bistack.data.splits import read_train_and_dev
from bistack.errors import DataError
from bistack.files.modeldir import save_metadata, save_weights
from bistack.inputs import Input
from bistack.metrics.dev import Evaluation, Metric
from bistack.metrics.text import Scores
from bistack.models.saved import SavedKind, SavedModel
from bistack.runs.driver import Prepared
from bistack.runs.loop import Run

KIND = "span_classifier"


@dataclass(frozen=True)
class Span:
    """A text and the character span ``text[start:end]`` to classify."""

    text: str
    start: int
    end: int

    @property
    def words(self) -> list[str]:
        return self.text[self.start : self.end].lower().split()


def read_span(value: Any) -> Span:
    """``"I love [Paris] ."`` or ``{"text": "I love Paris .", "start": 7, "end": 12}``."""
    if isinstance(value, dict):
        text, start, end = value.get("text"), value.get("start"), value.get("end")
        if not (isinstance(text, str) and isinstance(start, int) and isinstance(end, int)):
            raise ValueError("a span object needs a text and integer start and end")
    else:
        start, end = value.find("["), value.find("]")
        if start < 0 or end < start or value.count("[") != 1 or value.count("]") != 1:
            raise ValueError(f"mark the span with one pair of brackets: {value!r}")
        text = value[:start] + value[start + 1 : end] + value[end + 1 :]
        end -= 1
    if not 0 <= start < end <= len(text) or not text[start:end].strip():
        raise ValueError(f"the span {start}..{end} is empty or outside the text")
    return Span(text, start, end)


def is_span(value: Any) -> bool:
    return isinstance(value, dict) or (isinstance(value, str) and "[" in value)


SPAN = Input(
    "span",
    "a text with its span in [brackets]",
    is_span,
    lambda model, values, **options: model.predict(values, **options),
    "I love [Paris] .",
    read_span,
)


@dataclass
class SpanClassifierConfig(ExperimentConfig):
    kind: Literal["span_classifier"] = "span_classifier"
    # JSON lines of {"text", "start", "end", "label"}
    data: SplitConfig = field(default_factory=SplitConfig)
    dim: int = 16
    optimizer: OptimizerConfig = field(
        default_factory=lambda: OptimizerConfig(name="adam", lr=0.05, lr_decay=0.0)
    )
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_epochs=15, patience=15))


def read_spans(path: str) -> list[tuple[Span, str]]:
    examples = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        record = json.loads(line)
        try:
            examples.append((read_span(record), str(record["label"])))
        except (ValueError, KeyError) as error:
            raise DataError(path, str(error), number) from None
    return examples


class SpanNetwork(nn.Module):
    """The mean of the span's word embeddings, then a linear layer."""

    def __init__(self, words: int, dim: int, labels: int) -> None:
        super().__init__()
        self.embedding = nn.EmbeddingBag(words, dim, mode="mean")
        self.output = nn.Linear(dim, labels)

    def scores(self, words: list[list[int]]) -> Tensor:
        flat = torch.tensor([w for ws in words for w in ws])
        offsets = torch.tensor([0, *torch.tensor([len(ws) for ws in words]).cumsum(0)[:-1]])
        return self.output(self.embedding(flat, offsets))

    def forward(self, batch: SpanBatch) -> Tensor:
        return nn.functional.cross_entropy(self.scores(batch.words), batch.labels)


@dataclass(frozen=True)
class SpanBatch:
    words: list[list[int]]  # each span's word ids
    labels: Tensor  # (batch,)

    def to(self, device: Any) -> SpanBatch:
        return SpanBatch(self.words, self.labels.to(device))


@dataclass(frozen=True)
class SpanPrediction:
    span: Span
    label: str
    probabilities: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        span = {"start": self.span.start, "end": self.span.end}
        return {
            "text": self.span.text,
            "span": span,
            "label": self.label,
            "probabilities": self.probabilities,
        }


def bracketed_line(prediction: SpanPrediction, extra: dict[str, Any] | None = None) -> str:
    """The text with its span in brackets, then its label: ``I met [Anna] .<TAB>PER``."""
    span = prediction.span
    marked = f"{span.text[: span.start]}[{span.text[span.start : span.end]}]{span.text[span.end :]}"
    return f"{marked}\t{prediction.label}\n"


# A format of this kind's own, declared on its card alone: predict --format brackets.
BRACKETS = OutputFormat(
    "brackets", "the text with its span in [brackets], then its label", bracketed_line
)


class Accuracy(Scores):
    def __str__(self) -> str:
        return f"accuracy {self['accuracy']:.2f} on {self['examples']} spans"


class SpanClassifier(SavedKind):
    KIND = KIND
    CONFIG = SpanClassifierConfig

    def __init__(self, network: SpanNetwork, words: list[str], labels: list[str], config):
        self.network, self.words, self.labels, self.config = network, words, labels, config
        self.index = {w: i for i, w in enumerate(words)}

    @classmethod
    def from_saved(cls, saved: SavedModel) -> SpanClassifier:
        words, labels = saved.vocab["words"], saved.vocab["labels"]
        network = saved.weights_into(SpanNetwork(len(words), saved.config.dim, len(labels)))
        return cls(network.eval(), words, labels, saved.config)

    def save_metadata(self, path: str | Path) -> None:
        vocab = {"words": self.words, "labels": self.labels}
        save_metadata(path, KIND, self.config.to_dict(), vocab)

    def save_weights(self, path: str | Path) -> None:
        save_weights(path, self.network)

    def encode(self, span: Span) -> list[int]:
        return [self.index.get(w, 0) for w in span.words] or [0]

    @torch.no_grad()
    def predict(self, spans: Sequence[Span], top_labels: int | None = None) -> list[SpanPrediction]:
        """Each span's label, and the probabilities of the ``top_labels`` likeliest labels
        (None: of every label)."""
        scores = self.network.scores([self.encode(s) for s in spans]).softmax(dim=-1).tolist()
        predictions = []
        for span, row in zip(spans, scores, strict=True):
            ranked = sorted(zip(self.labels, row, strict=True), key=lambda pair: -pair[1])
            predictions.append(SpanPrediction(span, ranked[0][0], dict(ranked[:top_labels])))
        return predictions

    def evaluate(self, path: str | Path) -> Accuracy:
        examples = read_spans(str(path))
        predicted = self.predict([span for span, _ in examples])
        right = sum(p.label == gold for p, (_, gold) in zip(predicted, examples, strict=True))
        return Accuracy({"accuracy": 100 * right / len(examples), "examples": len(examples)})

    def describe(self) -> dict[str, Any]:
        return {"labels": self.labels}


class SpanTask:
    """What the training loop needs."""

    def __init__(self, model: SpanClassifier, train, dev) -> None:
        self.model, self.train, self.dev = model, train, dev

    def train_lengths(self) -> Sequence[int]:
        return [len(span.words) for span, _ in self.train]

    def collate(self, indices: list[int]) -> SpanBatch:
        chosen = [self.train[i] for i in indices]
        labels = torch.tensor([self.model.labels.index(label) for _, label in chosen])
        return SpanBatch([self.model.encode(span) for span, _ in chosen], labels)

    def evaluate(self) -> Evaluation:
        predicted = self.model.predict([span for span, _ in self.dev])
        right = sum(p.label == g for p, (_, g) in zip(predicted, self.dev, strict=True))
        accuracy = 100 * right / len(self.dev)
        return Evaluation(accuracy, {"dev_accuracy": accuracy}, f"dev accuracy {accuracy:.1f}")

    def save_weights(self, directory: Path) -> None:
        self.model.save_weights(directory)


def prepare(config: SpanClassifierConfig, run: Run) -> Prepared:
    data = read_train_and_dev(read_spans, config.data)
    words = ["<unk>", *sorted({w for span, _ in data.train for w in span.words})]
    labels = sorted({label for _, label in data.train})
    network = SpanNetwork(len(words), config.dim, len(labels))
    model = SpanClassifier(network, words, labels, config)
    summary = f"spans: {len(data.train)} train, {len(data.dev)} dev"
    return Prepared(model, network, SpanTask(model, data.train, data.dev), summary)


CARD = Card(
    KIND,
    "a span classifier",
    config=SpanClassifierConfig,
    recipe=prepare,
    loader=SpanClassifier,
    metric=Metric("dev_accuracy", "dev accuracy", higher_is_better=True),
    inputs=(SPAN,),
    formats=(JSONL, BRACKETS),
    predict_options=(
        PredictOption(
            "top_labels",
            int,
            "the probabilities of the K likeliest labels only",
            low=1,
            metavar="K",
        ),
    ),
    view="classes",
)
