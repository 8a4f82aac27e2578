"""Train a classifier or regressor that pools over a transformer's layers.

Frozen backbone: every text's per-layer vectors come from the feature cache (computed once),
so an epoch is a pass over small tensors. Fine-tuned: the backbone runs in every step, at its
own learning rate, under a warm-up schedule and gradient clipping from the config; with its
top K layers alone trained (``backbone.finetune: K``), a step runs those K layers from the
frozen bottom's output, cached once (``bistack.models.boundary``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import torch
from torch import Tensor

from bistack.config import BackboneConfig
from bistack.data.batching import collate_encoded
from bistack.data.features import EncodedSentence
from bistack.data.tables import Example, Tables
from bistack.data.tokenize import tokenize_text
from bistack.devices.choice import moved_to
from bistack.errors import ConfigError
from bistack.metrics.dev import Evaluation
from bistack.models.backbone import LayerVectors, TransformerBackbone
from bistack.models.boundary import BoundaryCache, boundary_layers, freeze_below_top
from bistack.models.feature_cache import cached_layer_vectors, model_fingerprint
from bistack.models.frozen_pass import FrozenPass
from bistack.models.mode import evaluating
from bistack.runs.driver import Prepared
from bistack.runs.loop import Run
from bistack.runs.vocabularies import build_vocabularies, initialise_words, singleton_mask
from bistack.text_models.config import LayerPoolingTextConfig
from bistack.text_models.layer_network import (
    Batch,
    LayerBatch,
    StackedSubwords,
    build_layer_pooling_model,
)
from bistack.text_models.layer_text import (
    LayerPoolingClassifier,
    LayerPoolingRegressor,
    LayerPoolingTextModel,
)
from bistack.text_models.outputs import RawOutputs, TargetOutputs
from bistack.text_models.recipe import (
    TextData,
    dev_evaluation,
    finish_on_dev,
    load_text_data,
    text_outputs,
)

VectorSource = Callable[[Sequence[Example]], LayerVectors]


def window_settings(backbone: TransformerBackbone, options: BackboneConfig) -> dict[str, object]:
    """How texts are cut into subword windows, as a cache's key names it."""
    return {
        "max_length": backbone.limit(options.max_length),
        "long_texts": options.long_texts,
        "stride": options.stride if options.long_texts == "sliding_window" else 0,
    }


def frozen_vectors(
    backbone: TransformerBackbone,
    config: LayerPoolingTextConfig,
    examples: Sequence[Example],
    say: Callable[[str], None],
    device: str | torch.device = "cpu",
) -> LayerVectors:
    """Per-layer vectors of ``examples`` from the feature cache, computed on a miss on
    ``device`` (the run's: a GPU computes them at its own speed)."""
    options = config.backbone
    texts = [e.text for e in examples]
    limit = backbone.limit(options.max_length)
    frozen = FrozenPass.of(options)
    settings = frozen.cache_settings(window_settings(backbone, options))

    def compute(indices: list[int]) -> LayerVectors:
        chosen = [texts[i] for i in indices]
        long = backbone.count_long(chosen, limit)
        if long:
            action = "truncated" if options.long_texts == "truncate" else "cut into windows"
            say(f"{long} of {len(chosen)} texts exceed {limit} subwords and are {action}")
        with moved_to(backbone, device):
            return backbone.layer_vectors(
                chosen,
                options.long_texts,
                stride=options.stride,
                max_length=limit,
                batch_size=options.batch_size,
                frozen=frozen,
                say=say,
            )

    cached = cached_layer_vectors(
        options.cache_dir, model_fingerprint(backbone.folder), texts, settings, compute
    )
    say(f"per-layer vectors of {len(texts)} texts {cached.said} ({cached.path})")
    return cached.vectors


class VectorsByExample:
    """Per-layer vectors of examples, looked up in whole-table tensors computed once (by
    studies that train many heads on subsets of one table: compare-poolers, cross-validation).

    Examples are matched by identity: splits and folds keep the objects the table reader made.
    """

    def __init__(self) -> None:
        self.index: dict[int, tuple[LayerVectors, int]] = {}

    def add(self, examples: Sequence[Example], vectors: LayerVectors) -> None:
        for position, example in enumerate(examples):
            self.index[id(example)] = (vectors, position)

    def __call__(self, examples: Sequence[Example]) -> LayerVectors:
        parts = [self.index[id(e)] for e in examples]
        cls = torch.stack([v.cls[i] for v, i in parts])
        mean = torch.stack([v.mean[i] for v, i in parts])
        return LayerVectors(cls, mean)


class LayerTextTask:
    """Batches of cached per-layer vectors (frozen backbone: each batch is a slice of one
    tensor), of tokenised texts (fine-tuned backbone), or of the frozen bottom's cached output
    (the layers above ``boundary`` trained), and dev scoring."""

    def __init__(
        self,
        model: LayerPoolingTextModel,
        data: TextData,
        targets: Tensor,
        run: Run,
        calibrate: bool,
        vectors_of: VectorSource | None,
        encoded: list[EncodedSentence] | None = None,
        boundary: int | None = None,
    ) -> None:
        self.model = model
        self.data = data
        self.targets = targets
        self.calibrate = calibrate
        self.encoded = encoded  # the training texts' token features, when stacked
        self.texts = [e.text for e in data.train]
        self.layers: Tensor | None = None  # (texts, num_layers, hidden_size) when frozen
        self.dev_vectors: LayerVectors | None = None
        self.windows: list[list[list[int]]] = []  # fine-tuned: each text's subwords, once
        options = model.config.backbone
        self.bottoms: tuple[BoundaryCache, BoundaryCache] | None = None  # train's, dev's
        if vectors_of is not None:
            self.layers = vectors_of(data.train).of(model.model.features)
            self.dev_vectors = vectors_of(data.dev)
        elif boundary is not None:
            self.bottoms = (
                self.bottom(boundary, data.train, run),
                self.bottom(boundary, data.dev, run),
            )
        else:
            self.windows = model.backbone.encode(
                self.texts, options.long_texts, options.stride, options.max_length
            )

    def bottom(self, boundary: int, examples: Sequence[Example], run: Run) -> BoundaryCache:
        """The frozen bottom's output for ``examples``, from the cache or computed (on the
        run's device) and cached."""
        backbone, options = self.model.backbone, self.model.config.backbone
        texts = [e.text for e in examples]
        settings = window_settings(backbone, options)
        windows = backbone.encode(texts, options.long_texts, options.stride, options.max_length)
        with moved_to(backbone, run.fabric.device):
            return BoundaryCache(
                backbone,
                boundary,
                self.model.model.features,
                texts,
                windows,
                settings,
                options.cache_dir,
                run.say,
                max_length=options.max_length,
                frozen=FrozenPass.of(options),
                batch_size=options.batch_size,
            )

    def train_lengths(self) -> Sequence[int]:
        if self.layers is not None:
            return [1] * len(self.layers)
        return [len(text.split()) for text in self.texts]

    def collate(self, indices: list[int]) -> Batch:
        index = torch.tensor(indices)
        tokens = None
        if self.encoded is not None:
            assert self.model.vocabularies is not None
            chosen = [self.encoded[i] for i in indices]
            tokens = collate_encoded(chosen, self.model.vocabularies)
        if self.layers is not None:
            return LayerBatch(self.layers[index], self.targets[index], tokens)
        if self.bottoms is not None:
            return self.bottoms[0].batch(indices, self.targets[index], tokens)
        subwords = self.model.backbone.batch_of(
            [self.windows[i] for i in indices],
            self.model.config.backbone.max_length,
            targets=self.targets[index],
        )
        return subwords if tokens is None else StackedSubwords(subwords, tokens)

    def dev_outputs(self, model: LayerPoolingTextModel) -> RawOutputs:
        texts = [e.text for e in self.data.dev]
        if self.dev_vectors is not None:
            return model.outputs_of(self.dev_vectors, texts)
        if self.bottoms is not None:  # the whole encoder's pass, its bottom read from the cache
            return model.outputs_of_layers(self.dev_layers(model), texts)
        return model.run(texts)

    def dev_layers(self, model: LayerPoolingTextModel) -> Tensor:
        """Every dev text's vector of every layer ``(texts, layers, hidden)``, the trained top
        layers run (in evaluation mode) from the cached bottom, on the host."""
        assert self.bottoms is not None, "a top-K run"
        dev, size = self.bottoms[1], self.model.config.train.eval_batch_size
        device = next(model.model.parameters()).device
        parts = []
        with evaluating(model.model), torch.no_grad():
            for start in range(0, len(self.data.dev), size):
                batch = dev.batch(range(start, min(start + size, len(self.data.dev))))
                found = boundary_layers(model.backbone, batch.to(device), model.model.features)
                parts.append(found.float().cpu())
        return torch.cat(parts)

    def evaluate(self) -> Evaluation:
        raw = self.dev_outputs(self.model)
        if self.calibrate and self.data.calibrate_on_dev:  # as for recurrent regressors
            # calibrate is set for regressors alone, whose outputs are targets
            outputs = cast(TargetOutputs, self.model.outputs)
            outputs.fit_calibration(self.data.dev, self.data.dev_source, raw)
        return dev_evaluation(
            self.model, self.model.metrics(self.data.dev, raw, self.data.dev_source)
        )

    def save_weights(self, directory: Path) -> None:
        self.model.save_weights(directory)

    def finish(self, run: Run) -> None:
        """Calibrate the best model on dev; save its dev metrics."""
        # A frozen backbone is this run's own, unchanged: the best head joins it (not a copy).
        best = type(self.model).load(run.model_dir, backbone=self.model.backbone)
        finish_on_dev(best, self.data, self.dev_outputs(best), self.calibrate, run)


def prepare_layer_text_model(
    config: LayerPoolingTextConfig,
    run: Run,
    model_class: type[LayerPoolingTextModel],
    *,
    backbone: TransformerBackbone | None = None,
    data: TextData | None = None,
    vectors_of: VectorSource | None = None,
    tables: Tables | None = None,
) -> Prepared:
    """The layer-pooling classifier or regressor ``config`` describes.

    ``backbone``, ``data`` and ``vectors_of`` (per-layer vectors of a list of examples) let a
    caller that trains many heads on subsets of one table (compare-poolers) load them once; by
    default all come from the config and the feature cache. ``tables``: rows handed over from
    Python (see ``load_text_data``).
    """
    data = data or load_text_data(config, tables)
    backbone = backbone or TransformerBackbone.load(config.backbone.path)
    outputs = text_outputs(config, model_class.OUTPUTS, data)
    vocabularies, vectors, encoded, singletons = None, None, None, None
    if config.features is not None:
        tokenizer = config.data.tokenizer
        pairs: list[tuple[list[str], list[str]]] = [
            ([t.text for t in tokenize_text(e.text, tokenizer)], []) for e in data.train
        ]
        vocabularies, vectors = build_vocabularies(config.features, pairs)
        singletons = singleton_mask(vocabularies, pairs)
        encoded = [vocabularies.encode(tokens) for tokens, _ in pairs]
    try:
        network = build_layer_pooling_model(
            config,
            backbone.num_layers,
            backbone.hidden_size,
            len(outputs),
            backbone,
            loss=outputs.LOSS,
            vocabularies=vocabularies,
            singletons=singletons,
        )
    except ValueError as error:
        raise ConfigError(f"layer_pooling: {error}") from None
    if network.words is not None and vocabularies is not None and config.features is not None:
        dev_tokens = (t.text for e in data.dev for t in tokenize_text(e.text, tokenizer))
        run.say(
            initialise_words(
                network.words.embedder,
                config.features,
                vocabularies,
                vectors,
                (t for tokens, _ in pairs for t in tokens),
                dev_tokens,
            )
        )
    boundary = top_layers_boundary(config, backbone)
    model = model_class(network, backbone, config, outputs, vocabularies)
    targets = torch.tensor(outputs.training_targets(data.train, config.data.train))
    if not config.backbone.finetune:
        vectors_of = vectors_of or (
            lambda examples: frozen_vectors(backbone, config, examples, run.say, run.fabric.device)
        )
    task = LayerTextTask(
        model,
        data,
        targets,
        run,
        config.regression.calibrate,
        None if config.backbone.finetune else vectors_of,
        encoded,
        boundary,
    )
    mode = config.backbone.described()
    return Prepared(
        model=model,
        network=network,
        parameter_groups=network.parameter_groups,
        loop=task,
        summary=(
            f"{config.kind}: {len(data.train)} train texts, {len(data.dev)} dev from "
            f"{data.dev_source}; backbone {config.backbone.named(backbone.folder)} "
            f"({backbone.num_layers} layers, "
            f"{mode}); {config.layer_pooling.type} pooling"
            + (f"; stacked: {len(vocabularies.words)} words" if vocabularies else "")
        ),
        finish=task.finish,
    )


def top_layers_boundary(
    config: LayerPoolingTextConfig, backbone: TransformerBackbone
) -> int | None:
    """Where the frozen bottom ends when ``backbone.finetune`` gives a number of top layers
    (its layers below frozen, no gradient), or None: frozen, or fine-tuned whole (the number
    of all its layers is that too)."""
    return freeze_below_top(backbone, config.backbone.top_layers)


def prepare_layer_classifier(config: LayerPoolingTextConfig, run: Run, **inputs) -> Prepared:
    return prepare_layer_text_model(config, run, LayerPoolingClassifier, **inputs)


def prepare_layer_regressor(config: LayerPoolingTextConfig, run: Run, **inputs) -> Prepared:
    return prepare_layer_text_model(config, run, LayerPoolingRegressor, **inputs)
