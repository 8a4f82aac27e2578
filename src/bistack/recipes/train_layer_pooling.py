"""Train a classifier or regressor that pools over a transformer's layers.

Frozen backbone: every text's per-layer vectors come from the feature cache (computed once),
so an epoch is a pass over small tensors. Fine-tuned: the backbone runs in every step, at its
own learning rate, under a warm-up schedule and gradient clipping from the config.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from bistack.api.layer_text import (
    LayerPoolingClassifier,
    LayerPoolingRegressor,
    LayerPoolingTextModel,
)
from bistack.config import LayerPoolingTextConfig
from bistack.data.tables import Example
from bistack.errors import ConfigError
from bistack.feature_cache import cached_layer_vectors, model_fingerprint
from bistack.modeldir import write_json
from bistack.models.backbone import LayerVectors, SubwordBatch, TransformerBackbone
from bistack.models.layer_pooling_model import LayerBatch, build_layer_pooling_model
from bistack.recipes.loop import Evaluation, FitResult, fit, start_run
from bistack.recipes.train_text import (
    TextData,
    dev_evaluation,
    load_text_data,
    output_info,
    targets_tensor,
)

VectorSource = Callable[[Sequence[Example]], LayerVectors]


def build_model(
    config: LayerPoolingTextConfig, backbone: TransformerBackbone, outputs: dict
) -> LayerPoolingTextModel:
    """The untrained model a config describes, over ``backbone``."""
    count = len(outputs["labels"]) if "labels" in outputs else len(outputs["targets"])
    try:
        network = build_layer_pooling_model(
            config, backbone.num_layers, backbone.hidden_size, count, backbone
        )
    except ValueError as error:
        raise ConfigError(f"layer_pooling: {error}") from None
    kind = LayerPoolingClassifier if config.task == "classification" else LayerPoolingRegressor
    return kind(network, backbone, config, outputs)


def frozen_vectors(
    backbone: TransformerBackbone,
    config: LayerPoolingTextConfig,
    examples: Sequence[Example],
    say: Callable[[str], None],
) -> LayerVectors:
    """Per-layer vectors of ``examples`` from the feature cache, computed on a miss."""
    options = config.backbone
    texts = [e.text for e in examples]
    limit = min(options.max_length or backbone.max_length, backbone.max_length)
    settings = {
        "max_length": limit,
        "long_texts": options.long_texts,
        "stride": options.stride if options.long_texts == "sliding_window" else 0,
    }

    def compute() -> LayerVectors:
        long = backbone.count_long(texts, limit)
        if long:
            action = "truncated" if options.long_texts == "truncate" else "cut into windows"
            say(f"{long} of {len(texts)} texts exceed {limit} subwords and are {action}")
        return backbone.layer_vectors(
            texts,
            options.long_texts,
            stride=options.stride,
            max_length=limit,
            batch_size=options.batch_size,
        )

    cached = cached_layer_vectors(
        options.cache_dir, model_fingerprint(backbone.folder), texts, settings, compute
    )
    verb = "computed and cached" if cached.computed else "read from the cache"
    say(f"per-layer vectors of {len(texts)} texts {verb} ({cached.path})")
    return cached.vectors


class CachedLayersTask:
    """Training on cached per-layer vectors: each batch is a slice of one tensor."""

    def __init__(
        self,
        model: LayerPoolingTextModel,
        layers: Tensor,
        targets: Tensor,
        dev: Sequence[Example],
        dev_vectors: LayerVectors,
        dev_source: str,
        model_dir: Path,
    ) -> None:
        self.model = model
        self.layers = layers  # (texts, num_layers, hidden_size)
        self.targets = targets
        self.dev = dev
        self.dev_vectors = dev_vectors
        self.dev_source = dev_source
        self.model_dir = model_dir

    def train_lengths(self) -> Sequence[int]:
        return [1] * len(self.layers)

    def collate(self, indices: list[int]) -> LayerBatch:
        index = torch.tensor(indices)
        return LayerBatch(self.layers[index], self.targets[index])

    def evaluate(self) -> Evaluation:
        raw = self.model.outputs(self.dev_vectors)
        return dev_evaluation(self.model, self.model.metrics(self.dev, raw, self.dev_source))

    def save_weights(self) -> None:
        self.model.save_weights(self.model_dir)


class FineTuneTask:
    """Training the backbone with the head: each batch is tokenised texts."""

    def __init__(
        self, model: LayerPoolingTextModel, data: TextData, targets: Tensor, model_dir: Path
    ) -> None:
        self.model = model
        self.texts = [e.text for e in data.train]
        self.targets = targets
        self.data = data
        self.model_dir = model_dir
        self.lengths = [len(text.split()) for text in self.texts]

    def train_lengths(self) -> Sequence[int]:
        return self.lengths

    def collate(self, indices: list[int]) -> SubwordBatch:
        options = self.model.config.backbone
        return self.model.backbone.tokenize(
            [self.texts[i] for i in indices],
            options.long_texts,
            options.stride,
            options.max_length,
            targets=self.targets[torch.tensor(indices)],
        )

    def evaluate(self) -> Evaluation:
        return dev_evaluation(self.model, self.model.score(self.data.dev, self.data.dev_source))

    def save_weights(self) -> None:
        self.model.save_weights(self.model_dir)


@dataclass(frozen=True)
class TrainedHead:
    model_dir: Path
    fit: FitResult
    parameters: int  # trained parameters (the head, plus the backbone when fine-tuned)


def train_layer_pooling_model(
    config: LayerPoolingTextConfig,
    output: str | Path,
    *,
    devices: int | str = 1,
    strategy: str = "auto",
    accelerator: str = "cpu",
    progress: bool = True,
    backbone: TransformerBackbone | None = None,
    data: TextData | None = None,
    vectors_of: VectorSource | None = None,
) -> TrainedHead:
    """Train as ``config`` says; the best model goes to ``output/model``.

    ``backbone``, ``data`` and ``vectors_of`` (per-layer vectors of a list of examples) let a
    caller that trains many heads on subsets of one table (compare-poolers) load them once; by
    default all come from the config and the feature cache.
    """
    run = start_run(
        output, config.train.seed, devices=devices, strategy=strategy, accelerator=accelerator
    )
    say, model_dir = run.say, run.model_dir
    data = data or load_text_data(config)
    backbone = backbone or TransformerBackbone.load(config.backbone.path)
    model = build_model(config, backbone, output_info(config, data.train))
    targets = targets_tensor(model, data.train, config.data.train)
    targets_tensor(model, data.dev, data.dev_source)  # fail now, not after the first epoch
    network = model.model
    parameters = sum(p.numel() for p in network.parameters())
    mode = "fine-tuned" if config.backbone.finetune else "frozen"
    say(
        f"{config.task}: {len(data.train)} train texts, {len(data.dev)} dev from "
        f"{data.dev_source}; backbone {backbone.folder} ({backbone.num_layers} layers, "
        f"{mode}); {config.layer_pooling.type} pooling; {parameters:,} trained parameters"
    )
    if config.backbone.finetune:
        task: CachedLayersTask | FineTuneTask = FineTuneTask(model, data, targets, model_dir)
    else:
        vectors_of = vectors_of or (
            lambda examples: frozen_vectors(backbone, config, examples, say)
        )
        train_vectors = vectors_of(data.train)
        dev_vectors = vectors_of(data.dev)
        task = CachedLayersTask(
            model,
            train_vectors.of(network.features),
            targets,
            data.dev,
            dev_vectors,
            data.dev_source,
            model_dir,
        )
    if run.fabric.is_global_zero:
        model.save_metadata(model_dir)
    result = fit(run, network, task, config.train, config.optimizer, progress=progress)
    metric = "accuracy" if config.task == "classification" else "RMSE"
    say(
        f"best dev {metric} {abs(result.best_score):.4f} at epoch {result.best_epoch}; "
        f"model in {model_dir}"
    )
    if run.fabric.is_global_zero:
        best = type(model).load(model_dir)
        assert isinstance(best, LayerPoolingTextModel)
        if config.backbone.finetune:
            metrics = best.score(data.dev, data.dev_source)
        else:
            metrics = best.metrics(data.dev, best.outputs(dev_vectors), data.dev_source)
        write_json(run.output / "dev_metrics.json", metrics)
    return TrainedHead(model_dir, result, parameters)
