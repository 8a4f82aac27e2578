"""Text classifiers and regressors a user loads: ``Classifier.load(path).predict([...])``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from bistack.config import TextModelConfig, config_from_dict
from bistack.data.batching import bucket_batches, collate_text
from bistack.data.features import TokenVocabularies
from bistack.data.tables import Example, parse_targets, read_table
from bistack.data.tokenize import Token, tokenize_text
from bistack.errors import DataError
from bistack.metrics.classification import accuracy, confusion_matrix, macro_f1, pearson, rmse
from bistack.modeldir import (
    load_metadata,
    load_weights,
    model_kind,
    save_metadata,
    save_weights,
)
from bistack.models.classifier import SequenceClassifier, build_classifier

# Attention is called collapsed on a text when one position, or the first token, takes at
# least this much of it; the diagnostics warn when that holds for most texts (seed: "if all
# the mass sits on <pad> or on the first token, something is broken").
COLLAPSE_MASS = 0.9
FIRST_TOKEN_MASS = 0.5


@dataclass(frozen=True)
class TextPrediction:
    """A prediction for one text.

    Classification: ``label`` and ``probabilities``. Regression: ``values`` per target, in the
    original units. ``attention``: (token, weight) pairs when asked for and the pooling has them.
    """

    text: str
    label: str | None = None
    probabilities: dict[str, float] | None = None
    values: dict[str, float] | None = None
    attention: list[tuple[Token, float]] | None = None


@dataclass
class RawOutputs:
    """Model outputs for a list of texts, in input order."""

    tokens: list[list[Token]]
    outputs: Tensor  # (texts, num_outputs)
    weights: list[list[float]] | None  # per text, one weight per token
    padding_mass: float  # attention on padding over all batches: exactly 0 by construction


class TextModel(ABC):
    """A trained classifier or regressor with its vocabularies and label/target metadata."""

    KIND: ClassVar[str]

    def __init__(
        self,
        model: SequenceClassifier,
        vocabularies: TokenVocabularies,
        config: TextModelConfig,
        outputs: dict[str, Any],
    ) -> None:
        self.model = model.eval()
        self.vocabularies = vocabularies
        self.config = config
        self.output_info = outputs  # labels, or target names with mean and std

    @classmethod
    def load(cls, path: str | Path) -> TextModel:
        """Load a model directory written by ``bistack train`` (no unpickling)."""
        meta, vocab = load_metadata(path, cls.KIND)
        if "backbone" in meta["config"]:
            from bistack.api.layer_text import load_layer_pooling_model

            return load_layer_pooling_model(path, cls.KIND, meta)
        config = config_from_dict(meta["config"], source=f"{path}/config.json")
        assert isinstance(config, TextModelConfig)
        vocabularies = TokenVocabularies.from_json(vocab)
        model = build_classifier(config, vocabularies, num_outputs(meta["outputs"]))
        load_weights(path, model)
        return cls(model, vocabularies, config, meta["outputs"])

    def save(self, path: str | Path) -> None:
        self.save_metadata(path)
        self.save_weights(path)

    def save_weights(self, path: str | Path) -> None:
        save_weights(path, self.model)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            self.KIND,
            self.config.to_dict(),
            self.vocabularies.to_json(),
            outputs=self.output_info,
        )

    def tokenize(self, text: str) -> list[Token]:
        return tokenize_text(text, self.config.data.tokenizer)

    @torch.inference_mode()
    def run(self, texts: Sequence[str], batch_size: int | None = None) -> RawOutputs:
        """Outputs and attention for raw texts, batched by length, returned in input order."""
        batch_size = batch_size or self.config.train.eval_batch_size
        tokens = [self.tokenize(text) for text in texts]
        for index, text_tokens in enumerate(tokens):
            if not text_tokens:
                raise DataError("input", f"text {index + 1} has no tokens: {texts[index]!r}")
        encoded = [self.vocabularies.encode([t.text for t in ts]) for ts in tokens]
        outputs: list[Tensor] = [torch.empty(0)] * len(texts)
        weights: list[list[float]] = [[] for _ in texts]
        padding_mass = 0.0
        was_training = self.model.training
        self.model.eval()
        for indices in bucket_batches([len(t) for t in tokens], batch_size, shuffle=False):
            batch = collate_text([encoded[i] for i in indices], self.vocabularies)
            result = self.model.predict(batch)
            if result.weights is not None:
                padding_mass += float(result.weights[~batch.mask].sum())
            for row, index in enumerate(indices):
                outputs[index] = result.outputs[row]
                if result.weights is not None:
                    weights[index] = result.weights[row, : len(tokens[index])].tolist()
        self.model.train(was_training)
        has_weights = self.config.pooling.type in ("additive", "dot")
        return RawOutputs(
            tokens, torch.stack(outputs), weights if has_weights else None, padding_mass
        )

    def evaluate(self, path: str | Path) -> dict[str, Any]:
        """Metrics on a labelled table, with attention diagnostics when the pooling attends."""
        data = self.config.data
        examples = read_table(path, data.text_column, data.label_columns, file_format=data.format)
        return self.score(examples, path)

    @abstractmethod
    def predict(self, texts: Sequence[str], attention: bool = False) -> list[TextPrediction]:
        """One prediction per text."""

    @abstractmethod
    def score(self, examples: Sequence[Example], path: str | Path = "<data>") -> dict[str, Any]:
        """Metrics against the examples' labels; errors name the row of a bad label."""

    @staticmethod
    def _with_attention(
        raw: RawOutputs, attention: bool, index: int
    ) -> list[tuple[Token, float]] | None:
        if not attention or raw.weights is None:
            return None
        return list(zip(raw.tokens[index], raw.weights[index], strict=True))


class Classifier(TextModel):
    """Predicts one label per text."""

    KIND = "classifier"

    @property
    def labels(self) -> list[str]:
        return list(self.output_info["labels"])

    def predict(self, texts: Sequence[str], attention: bool = False) -> list[TextPrediction]:
        """Label and class probabilities per text; ``attention=True`` adds token weights."""
        raw = self.run(texts)
        probabilities = torch.softmax(raw.outputs, dim=-1).tolist()
        labels = self.labels
        return [
            TextPrediction(
                text,
                label=labels[max(range(len(labels)), key=row.__getitem__)],
                probabilities=dict(zip(labels, row, strict=True)),
                attention=self._with_attention(raw, attention, i),
            )
            for i, (text, row) in enumerate(zip(texts, probabilities, strict=True))
        ]

    def label_ids(self, examples: Sequence[Example], path: str | Path) -> list[int]:
        """Class ids of the examples' labels; an unknown label is an error naming its row."""
        index = {label: i for i, label in enumerate(self.labels)}
        for example in examples:
            if example.labels[0] not in index:
                raise DataError(
                    path,
                    f"label {example.labels[0]!r} never appeared in training "
                    f"(known: {', '.join(self.labels)})",
                    row=example.row,
                )
        return [index[e.labels[0]] for e in examples]

    def score(self, examples: Sequence[Example], path: str | Path = "<data>") -> dict[str, Any]:
        self.label_ids(examples, path)  # an unknown label fails before any work
        return self.metrics(examples, self.run([e.text for e in examples]), path)

    def metrics(
        self, examples: Sequence[Example], raw: RawOutputs, path: str | Path = "<data>"
    ) -> dict[str, Any]:
        """Accuracy, macro-F1 and the confusion matrix of ``raw`` against the labels."""
        gold = self.label_ids(examples, path)
        predicted = raw.outputs.argmax(dim=-1).tolist()
        return {
            "accuracy": accuracy(gold, predicted),
            "macro_f1": macro_f1(gold, predicted, len(self.labels)),
            "confusion_matrix": {
                "labels": self.labels,
                "rows_gold_columns_predicted": confusion_matrix(gold, predicted, len(self.labels)),
            },
            "examples": len(examples),
            **attention_diagnostics(raw),
        }


class Regressor(TextModel):
    """Predicts one or more numeric targets per text, in their original units."""

    KIND = "regressor"

    @property
    def targets(self) -> list[str]:
        return list(self.output_info["targets"])

    def values(self, raw: RawOutputs) -> Tensor:
        """``(texts, num_targets)`` in original units (training standardised them), with the
        dev calibration ``scale * value + offset`` per target when training fitted one."""
        mean = torch.tensor(self.output_info["mean"])
        std = torch.tensor(self.output_info["std"])
        values = raw.outputs * std + mean
        calibration = self.output_info.get("calibration")
        if calibration is not None:
            scale, offset = torch.tensor(calibration).T  # (num_targets,) each
            values = values * scale + offset
        return values

    def fit_calibration(
        self, examples: Sequence[Example], path: str | Path, raw: RawOutputs | None = None
    ) -> list[list[float]]:
        """Least-squares ``[scale, offset]`` per target mapping predictions onto ``examples``'
        targets; stored in ``output_info`` so that predictions use it from now on. ``raw``:
        the network's outputs on ``examples`` when the caller already has them."""
        self.output_info.pop("calibration", None)
        predicted = self.values(raw if raw is not None else self.run([e.text for e in examples]))
        gold = torch.tensor(parse_targets(examples, self.targets, path))
        calibration = []
        for j in range(len(self.targets)):
            design = torch.stack([predicted[:, j], torch.ones(len(examples))], dim=1).double()
            solution = torch.linalg.lstsq(design, gold[:, j : j + 1].double()).solution
            calibration.append([float(solution[0, 0]), float(solution[1, 0])])
        self.output_info["calibration"] = calibration
        return calibration

    def predict(self, texts: Sequence[str], attention: bool = False) -> list[TextPrediction]:
        """Values per target per text; ``attention=True`` adds token weights."""
        raw = self.run(texts)
        return [
            TextPrediction(
                text,
                values=dict(zip(self.targets, row, strict=True)),
                attention=self._with_attention(raw, attention, i),
            )
            for i, (text, row) in enumerate(zip(texts, self.values(raw).tolist(), strict=True))
        ]

    def score(self, examples: Sequence[Example], path: str | Path = "<data>") -> dict[str, Any]:
        parse_targets(examples, self.targets, path)  # a bad target fails before any work
        return self.metrics(examples, self.run([e.text for e in examples]), path)

    def metrics(
        self, examples: Sequence[Example], raw: RawOutputs, path: str | Path = "<data>"
    ) -> dict[str, Any]:
        """RMSE and Pearson r per target (original units) and their means over targets."""
        gold = parse_targets(examples, self.targets, path)
        predicted = self.values(raw).tolist()
        per_target = {
            name: {
                "rmse": rmse([g[j] for g in gold], [p[j] for p in predicted]),
                "pearson": pearson([g[j] for g in gold], [p[j] for p in predicted]),
            }
            for j, name in enumerate(self.targets)
        }
        return {
            "rmse": sum(t["rmse"] for t in per_target.values()) / len(per_target),
            "pearson": sum(t["pearson"] for t in per_target.values()) / len(per_target),
            "per_target": per_target,
            "examples": len(examples),
            **attention_diagnostics(raw),
        }


def attention_diagnostics(raw: RawOutputs) -> dict[str, Any]:
    """Where the attention mass goes, averaged over texts; empty for static pooling."""
    if raw.weights is None:
        return {}
    longer = [w for w in raw.weights if len(w) > 1]  # one token must take all the mass
    count = max(len(longer), 1)
    first = sum(w[0] for w in longer) / count
    peak = sum(max(w) for w in longer) / count
    collapsed = sum(max(w) >= COLLAPSE_MASS for w in longer) / count
    on_first = sum(w[0] >= FIRST_TOKEN_MASS for w in longer) / count
    warnings = []
    if on_first > 0.5:
        warnings.append(f"attention sits on the first token for {on_first:.0%} of texts")
    if collapsed > 0.5:
        warnings.append(f"attention collapses onto one position for {collapsed:.0%} of texts")
    return {
        "attention": {
            "mean_first_token_mass": first,
            "mean_top_position_mass": peak,
            "share_collapsed": collapsed,
            "share_on_first_token": on_first,
            "padding_mass": raw.padding_mass,
            "warnings": warnings,
        }
    }


def num_outputs(outputs: dict[str, Any]) -> int:
    return len(outputs["labels"]) if "labels" in outputs else len(outputs["targets"])


def load_text_model(path: str | Path) -> Classifier | Regressor:
    """Load whichever kind of text model ``path`` holds."""
    kind = model_kind(path)
    if kind == Regressor.KIND:
        return Regressor.load(path)  # type: ignore[return-value]
    return Classifier.load(path)  # type: ignore[return-value]
