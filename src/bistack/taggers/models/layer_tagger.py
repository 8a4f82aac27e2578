"""Taggers over a transformer's word-level states: ``LayerPoolingTagger.load(path)``.

A sibling of the recurrent :class:`~bistack.taggers.models.tagger.Tagger`: the same predictions and
scores
(``bistack.taggers.models.tagging``); the backbone's tokenizer reads the words, and a tagger that
stacks
the words' own features (``features`` in its config) keeps their vocabularies too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from bistack.data.batching import TokenBatch, collate_tokens
from bistack.data.conll import Sentence
from bistack.data.features import TokenVocabularies
from bistack.data.word_rows import Context
from bistack.files.modeldir import (
    checked_output_scheme,
    save_metadata,
)
from bistack.metrics.entities import EntityScores
from bistack.models.backbone import TransformerBackbone
from bistack.models.backbone_files import (
    backbone_record,
    load_saved_backbone,
    save_head_and_backbone,
)
from bistack.models.frozen_pass import FrozenPass
from bistack.models.mode import predicting
from bistack.models.saved import SavedKind, SavedModel
from bistack.models.word_pieces import tokenize_words, word_layer_states
from bistack.taggers.config import LayerPoolingTaggerConfig
from bistack.taggers.emissions.decoding import TagDecoder
from bistack.taggers.emissions.device_decoding import DeviceDecoding
from bistack.taggers.models.tagging import (
    Emitter,
    Tagging,
    context_emitter,
    host_array,
    score_sentences,
)
from bistack.taggers.networks.layer_network import (
    LayerTagger,
    WordLayerBatch,
    build_layer_tagger,
    pad_words,
)
from bistack.transfer import to_device

KIND = "layer_tagger"


class LayerPoolingTagger(SavedKind, DeviceDecoding):
    """A trained tagger over a transformer's layers, with its backbone and tag labels."""

    KIND = KIND
    CONFIG = LayerPoolingTaggerConfig

    def __init__(
        self,
        model: LayerTagger,
        backbone: TransformerBackbone,
        labels: list[str],
        config: LayerPoolingTaggerConfig,
        output_scheme: str,
        vocabularies: TokenVocabularies | None = None,
        calibration: dict[str, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        self.backbone = backbone.eval()
        self._labels = labels
        self.config = config
        self.output_scheme = output_scheme
        self.vocabularies = vocabularies  # of the stacked token features, if any
        self.calibration = dict(calibration or {})

    @classmethod
    def from_saved(
        cls, saved: SavedModel, backbone: TransformerBackbone | None = None
    ) -> LayerPoolingTagger:
        """``backbone``: the frozen backbone the directory names, when the caller holds it
        already (checked by its fingerprint, and moved to the device); a fine-tuned one always
        comes from the directory."""
        config, vocab = saved.config, saved.vocab
        backbone = load_saved_backbone(saved.path, config.backbone, saved.meta, backbone)
        vocabularies = TokenVocabularies.from_json(vocab) if config.features is not None else None
        labels = vocabularies.tags.items if vocabularies else list(vocab["tags"])
        model = saved.weights_into(
            build_layer_tagger(
                config, backbone.num_layers, backbone.hidden_size, labels, None, vocabularies
            )
        )
        if config.backbone.finetune:
            model.backbone = backbone
        backbone.to(saved.device)
        scheme = checked_output_scheme(saved.path, saved.meta)
        calibration = saved.meta.get("calibration")
        return cls(model, backbone, labels, config, scheme, vocabularies, calibration)

    def shared_parts(self) -> dict[str, Any]:
        """A frozen backbone, for the other members of its ensemble."""
        return {} if self.config.backbone.finetune else {"backbone": self.backbone}

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            KIND,
            self.config.to_dict(),
            self.vocabularies.to_json() if self.vocabularies else {"tags": self._labels},
            output_scheme=self.output_scheme,
            backbone=backbone_record(self.backbone),
            **({"calibration": self.calibration} if self.calibration else {}),
        )

    def save_weights(self, path: str | Path) -> None:
        save_head_and_backbone(path, self.model, self.backbone, self.config.backbone.finetune)

    def word_states(
        self, sentences: Sequence[Sequence[str]], contexts: Sequence[Context] | None = None
    ) -> torch.Tensor:
        """Flat word states ``(total_words, num_layers, hidden_size)`` of ``sentences``, each
        read with the words around it (``contexts``) when the backbone reads context."""
        options = self.config.backbone
        pieces = tokenize_words(
            self.backbone, sentences, options.max_length, contexts, options.context
        )
        pieces = pieces.to(next(self.backbone.parameters()).device)
        with torch.no_grad():
            frozen = FrozenPass.of(options)
            return word_layer_states(self.backbone, pieces, self.config.subwords, frozen)

    def token_features(
        self, sentences: Sequence[Sequence[str]], device: torch.device | str
    ) -> TokenBatch | None:
        """The stacked token features of ``sentences``, or None when the tagger has none."""
        if self.vocabularies is None:
            return None
        return collate_tokens(sentences, self.vocabularies).to(device)

    @property
    def decoder(self) -> TagDecoder:
        return self.calibrated(self.model.head.decoder())

    @property
    def batch_size(self) -> int:
        return self.config.backbone.batch_size

    def predicting(self) -> AbstractContextManager[Any]:
        return predicting(self.model)

    @property
    def device(self) -> str:
        return str(next(self.model.parameters()).device)

    def emissions(self, indices: Sequence[int], sentences: Sequence[Sequence[str]]) -> np.ndarray:
        return host_array(self.emissions_of(self.word_states(sentences), sentences))

    def emitter_of(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[Any] | None
    ) -> Emitter:
        """The network's pass over each batch, its emissions left on its device."""
        context = self.config.backbone.context
        if not context:
            return lambda indices, chosen: self.emissions_of(self.word_states(chosen), chosen)

        def emit(chosen: Sequence[Sequence[str]], contexts: Sequence[Context]) -> torch.Tensor:
            return self.emissions_of(self.word_states(chosen, contexts), chosen)

        return context_emitter(emit, sentences, documents, context)

    def shared_stage_key(self) -> Hashable | None:
        """A frozen backbone read with the same settings gives the same word states."""
        if self.config.backbone.finetune:
            return None
        options = self.config.backbone
        return FrozenPass.of(options).stage_key(
            self.backbone, options.max_length, options.context, repr(self.config.subwords)
        )

    def shared_emitter(
        self,
        taggers: Sequence[Tagging],
        sentences: Sequence[Sequence[str]],
        documents: Sequence[Any] | None,
    ) -> Emitter:
        """The emissions of ``taggers`` (over this one's frozen backbone, read alike) side by
        side along the tag axis, the backbone's word states computed once a batch."""
        members = cast("list[LayerPoolingTagger]", list(taggers))

        def emit(
            chosen: Sequence[Sequence[str]], contexts: Sequence[Context] | None
        ) -> torch.Tensor:
            states = self.word_states(chosen, contexts)
            return torch.cat([m.emissions_of(states, chosen) for m in members], dim=-1)

        context = self.config.backbone.context
        if not context:
            return lambda indices, chosen: emit(chosen, None)
        return context_emitter(emit, sentences, documents, context)

    def emissions_of(self, words: torch.Tensor, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Emissions ``(batch, seq_len, num_tags)``, on the network's device, of ``sentences``
        whose flat word states ``(total_words, num_layers, hidden_size)`` are ``words``."""
        device = next(self.model.parameters()).device
        lengths = [len(s) for s in sentences]
        layers = pad_words(to_device(words.float(), device), lengths)
        tokens = self.token_features(sentences, device)
        batch = WordLayerBatch.of_lengths(lengths, layers=layers, tokens=tokens)
        return self.model.emissions(batch.to(device))

    def cached(self, sentences: Sequence[Sequence[str]], states: torch.Tensor) -> Emitter:
        """Emissions from ``states``, the flat word states of all of ``sentences`` (the
        feature cache), instead of the backbone's pass."""
        starts = np.cumsum([0, *(len(s) for s in sentences)]).tolist()

        def emit(indices: Sequence[int], chosen: Sequence[Sequence[str]]) -> torch.Tensor:
            # One gather by row number (a cat of the float16 slices fails under CPU autocast).
            rows = torch.cat([torch.arange(starts[i], starts[i + 1]) for i in indices])
            words = states[rows]
            return self.emissions_of(words, chosen)

        return emit

    def tag_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None = None,
        documents: Sequence[Any] | None = None,
        states: torch.Tensor | None = None,
    ) -> list[list[str]]:
        """Tags for pre-tokenised sentences, in the output scheme, in input order.

        ``states``: the sentences' flat word states when already known (the feature cache).
        """
        emitter = None if states is None else self.cached(sentences, states)
        analyses = self._analyse(
            sentences, batch_size, confidence=False, emitter=emitter, documents=documents
        )
        return [a.tags for a in analyses]

    def score(
        self,
        sentences: Sequence[Sentence],
        path: str | Path = "<data>",
        states: torch.Tensor | None = None,
    ) -> EntityScores:
        """Score against gold tags; ``states``: the sentences' cached word states, if known."""

        def tag_tokens(
            tokens: Sequence[Sequence[str]], documents: Sequence[Any] | None = None
        ) -> list[list[str]]:
            return self.tag_tokens(tokens, documents=documents, states=states)

        return score_sentences(tag_tokens, self.labels, self.output_scheme, sentences, path)
