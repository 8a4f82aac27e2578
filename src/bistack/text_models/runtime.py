"""Exported classifiers and regressors on onnxruntime, without PyTorch: ``bistack
predict``/``serve`` of a directory ``bistack export`` wrote. The graph returns the network's raw
scores and the shared output math (``bistack.text_models.outputs``) makes the predictions and
scores, as for the PyTorch model.

A directory of format 1 (written before that) returns probabilities or values with the
temperature or calibration already applied; they are read as raw scores of outputs that apply
nothing more (log-probabilities under a temperature of 1; values with mean 0, std 1).

A member of an exported ensemble over a shared frozen backbone (format 3: its ``export.json``
names its ``stage``) holds its head alone; the backbone's graph is the ensemble's
(:class:`SharedStage`), run once a batch for every member that reads it.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bistack.config import ExperimentConfig
from bistack.data.buckets import bucket_batches
from bistack.data.subwords import SubwordSettings, text_windows
from bistack.data.tokenize import Token, tokenize_text
from bistack.errors import DataError, ModelFileError
from bistack.files.onnx_session import (
    EXPORT_FILE,
    MODEL_FILE,
    STAGE_FILE,
    TOKEN_INPUTS,
    WINDOW_INPUTS,
    ExportedFiles,
    check_member_reads,
    checked_stage,
    open_session,
    stage_shape,
    token_feed,
    tokenizer_in,
)
from bistack.text_models.base import OVER_LAYERS_REFUSAL, TextModelBase
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


class SubwordWindows:
    """A backbone's own tokenizer (``tokenizer.json``) cutting texts into subword windows as
    the PyTorch backbone does (``bistack.data.subwords``), as ``settings`` (export.json's or
    stage.json's ``tokenizer``) say; ``batch_size``: the backbone's batch."""

    def __init__(self, folder: Path, settings: dict[str, Any]) -> None:
        self.tokenizer = tokenizer_in(folder)
        self.sliding = settings["long_texts"] == "sliding_window"
        self.stride = int(settings["stride"])
        self.settings = SubwordSettings(
            int(settings["max_length"]), 0, "", int(settings["pad_id"] or 0)
        )
        self.batch_size = int(settings["batch_size"])

    def feed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """``WINDOW_INPUTS`` of ``texts``."""
        ids, mask, owners = text_windows(
            self.tokenizer, texts, self.settings, self.sliding, self.stride
        )
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "window_text": owners,
            "text_index": np.arange(len(texts), dtype=np.int64),
        }

    def batches(self, texts: Sequence[str], batch_size: int | None) -> list[list[int]]:
        """``texts``' indices in the batches the backbone reads (by length, as
        ``TransformerBackbone.layer_vectors`` orders them)."""
        size = self.batch_size if batch_size is None else batch_size
        return bucket_batches([len(text) for text in texts], size, shuffle=False)


class SharedStage:
    """The frozen backbone an exported ensemble's members share (``stages/NAME``): each text's
    per-layer vectors of every kind its members read, ``{kind: (texts, layers, hidden)}``, one
    pass of its graph a batch for all of them."""

    def __init__(self, folder: Path, threads: int | None) -> None:
        self.path = folder.resolve()
        try:
            meta = json.loads((folder / STAGE_FILE).read_text(encoding="utf-8"))
            self.kinds = [str(kind) for kind in meta["kinds"]]
            self.windows = SubwordWindows(folder, meta["tokenizer"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ModelFileError(
                f"{folder}: not the shared backbone of an exported ensemble ({error}); export "
                "the ensemble again"
            ) from None
        self.shape = stage_shape(meta, folder / STAGE_FILE)
        self.session = open_session(folder / MODEL_FILE, threads)
        checked_stage(folder, self.session, self.kinds)
        self.inputs = [i.name for i in self.session.get_inputs()]  # what the graph reads
        self.passes = 0  # batches read: a pass of the backbone's graph each

    def vectors(self, texts: Sequence[str], batch_size: int | None = None) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for chosen in self.windows.batches(texts, batch_size):
            feed = self.windows.feed([texts[i] for i in chosen])
            results = self.session.run(self.kinds, {k: feed[k] for k in self.inputs})
            self.passes += 1
            for kind, values in zip(self.kinds, results, strict=True):
                if kind not in found:
                    found[kind] = np.zeros((len(texts), *values.shape[1:]), dtype=np.float32)
                found[kind][chosen] = values
        return found


class ExportedLayerTextModel(ExportedText):
    """An exported classifier or regressor over a transformer's layers: the backbone's own
    tokenizer makes its subword windows (:class:`SubwordWindows`); a model that stacks the
    texts' own features reads them with ``vocab.json`` too. A member of an exported ensemble
    over a shared backbone holds its head alone and reads the backbone's vectors from its
    ``stage`` (handed over by the member that opened it first, else opened here)."""

    INPUTS = (*WINDOW_INPUTS, *TOKEN_INPUTS)
    REQUIRED = WINDOW_INPUTS

    def attention_refusal(self) -> str:
        return OVER_LAYERS_REFUSAL

    def __init__(self, files: ExportedFiles, stage: SharedStage | None = None) -> None:
        super().__init__(files)
        self.stage: SharedStage | None = None
        named = files.meta.get("stage")
        if named is None:  # the backbone in its own graph
            self.windows = SubwordWindows(files.path, files.setting("tokenizer"))
            self.batch_size = self.windows.batch_size
            return
        folder = (files.path / str(named)).resolve()
        self.stage = stage if stage is not None and stage.path == folder else None
        self.stage = self.stage or SharedStage(folder, files.threads)
        self.reads = str(files.setting("reads"))
        shape = stage_shape(files.meta, files.path / EXPORT_FILE)
        check_member_reads(
            files.path, folder, self.reads, self.stage.kinds, shape, self.stage.shape
        )
        self.batch_size = int(files.setting("batch_size"))

    def scores(
        self, texts: Sequence[str], batch_size: int | None
    ) -> tuple[list[list[Token]], np.ndarray, list[list[float]] | None]:
        """No tokens, no attention: the head pools over layers."""
        self.refuse_empty(texts)
        if self.stage is not None:
            vectors = self.stage.vectors(texts, batch_size)
            return [[] for _ in texts], self.head_scores(vectors, texts), None
        scores = np.zeros((len(texts), len(self.outputs)), dtype=np.float32)
        for chosen in self.windows.batches(texts, batch_size):
            chosen_texts = [texts[i] for i in chosen]
            feed = self.windows.feed(chosen_texts) | self.token_features(chosen_texts)
            scores[chosen] = self.files.run(feed)[0]
        return [[] for _ in texts], scores, None

    def head_scores(self, vectors: dict[str, np.ndarray], texts: Sequence[str]) -> np.ndarray:
        """The head's raw scores ``(texts, outputs)`` from the shared backbone's ``vectors``."""
        layers = vectors[self.reads]
        scores = np.zeros((len(texts), len(self.outputs)), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chosen = list(texts[start : start + self.batch_size])
            feed = {"layers": layers[start : start + len(chosen)]} | self.token_features(chosen)
            scores[start : start + len(chosen)] = self.files.run(feed)[0]
        return scores

    def token_features(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """A stacked model's token inputs of ``texts`` (none for a model that stacks none)."""
        if self.files.vocabularies is None:
            return {}
        tokens = []
        for index, text in enumerate(texts):
            tokens.append([t.text for t in self.tokenize(text)])
            if not tokens[-1]:
                raise DataError("input", f"text {index + 1} has no tokens: {text!r}")
        return token_feed(tokens, self.files.vocabularies)

    def shared_parts(self) -> dict[str, Any]:
        """Its shared backbone, for the other members of its ensemble."""
        return {} if self.stage is None else {"stage": self.stage}

    def shared_stage_key(self) -> Hashable | None:
        """Members reading one shared backbone's graph share its pass."""
        return None if self.stage is None else ("exported backbone", str(self.stage.path))

    def shared_stage(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool = False
    ) -> dict[str, np.ndarray]:
        self.refuse_empty(texts)
        assert self.stage is not None, "a member with a shared backbone"
        return self.stage.vectors(texts, batch_size)

    def run_after(self, stage: dict[str, np.ndarray], texts: Sequence[str]) -> RawOutputs:
        scores = self.outputs.exported_scores(self.head_scores(stage, texts), self.files.version)
        return RawOutputs([[] for _ in texts], scores, None, 0.0)


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
