"""Taggers over a transformer's word-level states, behind the recurrent tagger's API:
``Tagger.load(path)`` returns a :class:`LayerPoolingTagger` when the directory holds one.

As for text models, a frozen-backbone directory names its backbone with a fingerprint checked
on load, and a fine-tuned one holds the tuned backbone in ``backbone/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from bistack.api.layer_text import (
    backbone_record,
    load_saved_backbone,
    save_head_and_backbone,
)
from bistack.api.tagger import KIND, Tagger
from bistack.config import LayerPoolingTaggerConfig, config_from_dict
from bistack.data.batching import bucket_batches
from bistack.modeldir import load_weights, save_metadata
from bistack.models.backbone import TransformerBackbone, tokenize_words, word_layer_states
from bistack.models.layer_tagger import (
    LayerTagger,
    WordLayerBatch,
    build_layer_tagger,
    pad_words,
)
from bistack.schemes import convert_tags


class LayerPoolingTagger(Tagger):
    """A trained tagger over a transformer's layers, with its backbone and tag labels."""

    # Replaces, not extends, the recurrent tagger's state: there are no word vocabularies.
    def __init__(
        self,
        model: LayerTagger,
        backbone: TransformerBackbone,
        labels: list[str],
        config: LayerPoolingTaggerConfig,
        output_scheme: str,
    ) -> None:
        self.model = model.eval()
        self.backbone = backbone.eval()
        self._labels = labels
        self.config = config  # type: ignore[assignment]
        self.output_scheme = output_scheme

    @property
    def labels(self) -> list[str]:
        return list(self._labels)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            KIND,
            self.config.to_dict(),
            {"tags": self._labels},
            output_scheme=self.output_scheme,
            backbone=backbone_record(self.backbone),
        )

    def save_weights(self, path: str | Path) -> None:
        save_head_and_backbone(path, self.model, self.backbone, self.config.backbone.finetune)

    def word_states(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Flat word states ``(total_words, num_layers, hidden_size)`` of ``sentences``."""
        pieces = tokenize_words(self.backbone, sentences, self.config.backbone.max_length)
        with torch.inference_mode():
            return word_layer_states(self.backbone, pieces, self.config.subwords)

    @torch.inference_mode()
    def tag_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None = None,
        states: torch.Tensor | None = None,
    ) -> list[list[str]]:
        """Tags for pre-tokenised sentences, in the output scheme, in input order.

        ``states``: the sentences' flat word states when already known (the feature cache).
        """
        batch_size = batch_size or self.config.backbone.batch_size
        starts = [0]
        for sentence in sentences:
            starts.append(starts[-1] + len(sentence))
        results: list[list[str]] = [[] for _ in sentences]
        was_training = self.model.training
        self.model.eval()
        for indices in bucket_batches([len(s) for s in sentences], batch_size, shuffle=False):
            if any(not sentences[i] for i in indices):
                raise ValueError("cannot tag an empty sentence")
            chosen = [sentences[i] for i in indices]
            lengths = [len(s) for s in chosen]
            if states is None:
                words = self.word_states(chosen)
            else:
                words = torch.cat([states[starts[i] : starts[i + 1]] for i in indices]).float()
            layers = pad_words(words, lengths)
            mask = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
            predicted = self.model.decode(WordLayerBatch(mask, layers)).tolist()
            for row, index in enumerate(indices):
                tags = [self._labels[t] for t in predicted[row][: lengths[row]]]
                results[index] = convert_tags(tags, self.output_scheme)
        self.model.train(was_training)
        return results


def load_layer_tagger(path: str | Path, meta: dict[str, Any], vocab: dict) -> LayerPoolingTagger:
    """Rebuild a layer-pooling tagger directory written by ``bistack train``."""
    directory = Path(path)
    config = config_from_dict(meta["config"], source=f"{directory}/config.json")
    assert isinstance(config, LayerPoolingTaggerConfig)
    backbone = load_saved_backbone(directory, config.backbone, meta)
    labels = list(vocab["tags"])
    model = build_layer_tagger(config, backbone.num_layers, backbone.hidden_size, labels)
    load_weights(directory, model)
    if config.backbone.finetune:
        model.backbone = backbone
    return LayerPoolingTagger(model, backbone, labels, config, meta["output_scheme"])
