"""Exported classifiers and regressors on onnxruntime, without PyTorch: ``bistack
predict``/``serve`` of a directory ``bistack export`` wrote. The graph returns the network's raw
scores and the shared output math (``bistack.text_models.outputs``) makes the predictions and
scores, as for the PyTorch model.

A directory of format 1 (written before that) returns probabilities or values with the
temperature or calibration already applied; they are read as raw scores of outputs that apply
nothing more (log-probabilities under a temperature of 1; values with mean 0, std 1).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bistack.config import ExperimentConfig
from bistack.data.buckets import bucket_batches
from bistack.data.subwords import SubwordSettings, text_windows
from bistack.data.tokenize import Token, tokenize_text
from bistack.errors import DataError
from bistack.files.onnx_session import (
    TOKEN_INPUTS,
    WINDOW_INPUTS,
    ExportedFiles,
    token_feed,
)
from bistack.text_models.base import TextModelBase
from bistack.text_models.config import (
    ClassifierConfig,
    LayerClassifierConfig,
    LayerRegressorConfig,
    RegressorConfig,
)
from bistack.text_models.outputs import ClassOutputs, Outputs, RawOutputs, TargetOutputs


class ExportedText(TextModelBase):
    """What every exported text model shares; a subclass computes the graph's outputs for a
    batch of texts (``scores``), and each kind's class names what its outputs mean
    (``OUTPUTS``)."""

    OUTPUTS: ClassVar[type[ClassOutputs] | type[TargetOutputs]]
    CONFIG: ClassVar[type[ExperimentConfig]]
    INPUTS: ClassVar[tuple[str, ...]]  # what its graph may read, and must
    REQUIRED: ClassVar[tuple[str, ...]]

    @property
    def attends(self) -> bool:
        """Whether its graph returns token attention weights."""
        return False

    def __init__(self, files: ExportedFiles) -> None:
        self.files = files
        self.config = files.config
        info = files.setting("outputs")
        self.outputs: Outputs = (
            self.OUTPUTS(info) if files.version >= 2 else final(self.OUTPUTS, info)
        )
        files.expect_columns({files.output_names[0]: len(self.outputs)})  # scores (outputs)

    @classmethod
    def load(cls, path: str | Path, threads: int | None = None) -> ExportedText:
        return cls(ExportedFiles(path, cls.CONFIG, threads))

    def tokenize(self, text: str) -> list[Token]:
        return tokenize_text(text, self.config.data.tokenizer)

    @abstractmethod
    def scores(
        self, texts: Sequence[str], batch_size: int | None
    ) -> tuple[list[list[Token]], np.ndarray, list[list[float]] | None]:
        """Tokens, the graph's scores ``(texts, num_outputs)`` and attention weights, in input
        order."""

    def run(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> RawOutputs:
        tokens, scores, weights = self.scores(texts, batch_size)
        scores = self.outputs.exported_scores(scores, self.files.version)
        return RawOutputs(tokens, scores, weights, 0.0)


def final(
    outputs: type[ClassOutputs] | type[TargetOutputs], info: dict[str, Any]
) -> ClassOutputs | TargetOutputs:
    """Outputs that apply nothing more, for a format 1 graph that applied them itself."""
    return outputs.applying_nothing(info)


class ExportedTextModel(ExportedText):
    """An exported recurrent classifier or regressor: its graph reads the texts' tokens."""

    INPUTS = TOKEN_INPUTS
    REQUIRED = ("lengths",)

    @property
    def attends(self) -> bool:
        return self.config.pooling.type in ("additive", "dot")

    def scores(
        self, texts: Sequence[str], batch_size: int | None
    ) -> tuple[list[list[Token]], np.ndarray, list[list[float]] | None]:
        tokens = [self.tokenize(text) for text in texts]
        for index, text_tokens in enumerate(tokens):
            if not text_tokens:
                raise DataError("input", f"text {index + 1} has no tokens: {texts[index]!r}")
        vocabularies = self.files.token_vocabularies()
        scores = np.zeros((len(texts), len(self.outputs)), dtype=np.float32)
        weights: list[list[float]] = [[] for _ in texts]
        size = self.config.train.eval_batch_size if batch_size is None else batch_size
        for indices in bucket_batches([len(t) for t in tokens], size, shuffle=False):
            results = self.files.run(
                token_feed([[t.text for t in tokens[i]] for i in indices], vocabularies)
            )
            scores[indices] = results[0]
            for row, index in enumerate(indices):
                if self.attends:
                    weights[index] = results[1][row, : len(tokens[index])].tolist()
        return tokens, scores, weights if self.attends else None


class ExportedLayerTextModel(ExportedText):
    """An exported classifier or regressor over a transformer's layers: the backbone's own
    tokenizer (``tokenizer.json``) makes its subword windows as the PyTorch backbone does
    (``bistack.data.subwords``); a model that stacks the texts' own features reads them with
    ``vocab.json`` too."""

    INPUTS = (*WINDOW_INPUTS, *TOKEN_INPUTS)
    REQUIRED = WINDOW_INPUTS

    def __init__(self, files: ExportedFiles) -> None:
        super().__init__(files)
        self.tokenizer = files.tokenizer()
        tokenizer = files.setting("tokenizer")
        self.sliding = tokenizer["long_texts"] == "sliding_window"
        self.stride = int(tokenizer["stride"])
        self.settings = SubwordSettings(
            int(tokenizer["max_length"]), 0, "", int(tokenizer["pad_id"] or 0)
        )
        self.batch_size = int(tokenizer["batch_size"])

    def scores(
        self, texts: Sequence[str], batch_size: int | None
    ) -> tuple[list[list[Token]], np.ndarray, list[list[float]] | None]:
        """No tokens, no attention: the head pools over layers."""
        for index, text in enumerate(texts):
            if not text.strip():
                raise DataError("input", f"text {index + 1} is empty")
        scores = np.zeros((len(texts), len(self.outputs)), dtype=np.float32)
        lengths = [len(text) for text in texts]  # as TransformerBackbone.layer_vectors orders them
        for chosen in bucket_batches(
            lengths, self.batch_size if batch_size is None else batch_size, shuffle=False
        ):
            scores[chosen] = self.files.run(self.feed([texts[i] for i in chosen]))[0]
        return [[] for _ in texts], scores, None

    def feed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The graph's inputs: each text's subword windows, and a stacked model's tokens."""
        ids, mask, owners = text_windows(
            self.tokenizer, texts, self.settings, self.sliding, self.stride
        )
        feed = {
            "input_ids": ids,
            "attention_mask": mask,
            "window_text": owners,
            "text_index": np.arange(len(texts), dtype=np.int64),
        }
        if self.files.vocabularies is not None:
            tokens = []
            for index, text in enumerate(texts):
                tokens.append([t.text for t in self.tokenize(text)])
                if not tokens[-1]:
                    raise DataError("input", f"text {index + 1} has no tokens: {text!r}")
            feed |= token_feed(tokens, self.files.vocabularies)
        return feed


class ExportedClassifier(ExportedTextModel):
    OUTPUTS = ClassOutputs
    CONFIG = ClassifierConfig


class ExportedRegressor(ExportedTextModel):
    OUTPUTS = TargetOutputs
    CONFIG = RegressorConfig


class ExportedLayerClassifier(ExportedLayerTextModel):
    OUTPUTS = ClassOutputs
    CONFIG = LayerClassifierConfig


class ExportedLayerRegressor(ExportedLayerTextModel):
    OUTPUTS = TargetOutputs
    CONFIG = LayerRegressorConfig
