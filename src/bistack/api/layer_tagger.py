"""Taggers over a transformer's word-level states: ``LayerPoolingTagger.load(path)``.

A sibling of the recurrent :class:`~bistack.api.tagger.Tagger`: the same predictions and scores
(``bistack.api.tagging``); the backbone's tokenizer reads the words, and a tagger that stacks
the words' own features (``features`` in its config) keeps their vocabularies too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from bistack.api.backbone_files import backbone_record, load_saved_backbone, save_head_and_backbone
from bistack.api.predictor import shown
from bistack.api.tagging import (
    SentenceAnalysis,
    Tagging,
    analyse_batch,
    in_output_scheme,
    score_sentences,
)
from bistack.config import LayerPoolingTaggerConfig, build_config
from bistack.data.batching import TokenBatch, collate_tokens
from bistack.data.buckets import bucket_batches
from bistack.data.conll import Sentence
from bistack.data.features import TokenVocabularies
from bistack.metrics.entities import EntityScores
from bistack.modeldir import load_metadata, load_weights, reading_model, save_metadata
from bistack.models.backbone import TransformerBackbone, tokenize_words, word_layer_states
from bistack.models.layer_tagger import LayerTagger, WordLayerBatch, build_layer_tagger, pad_words
from bistack.models.mode import evaluating

KIND = "layer_tagger"


class LayerPoolingTagger(Tagging):
    """A trained tagger over a transformer's layers, with its backbone and tag labels."""

    KIND = KIND

    def __init__(
        self,
        model: LayerTagger,
        backbone: TransformerBackbone,
        labels: list[str],
        config: LayerPoolingTaggerConfig,
        output_scheme: str,
        vocabularies: TokenVocabularies | None = None,
    ) -> None:
        self.model = model.eval()
        self.backbone = backbone.eval()
        self._labels = labels
        self.config = config
        self.output_scheme = output_scheme
        self.vocabularies = vocabularies  # of the stacked token features, if any

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> LayerPoolingTagger:
        """Load a model directory written by ``bistack train`` (no unpickling), onto
        ``device`` (predictions build their batches there)."""
        with reading_model(path):
            directory = Path(path)
            meta, vocab = load_metadata(directory, KIND)
            config = build_config(
                LayerPoolingTaggerConfig, meta["config"], source=f"{directory}/config.json"
            )
            backbone = load_saved_backbone(directory, config.backbone, meta)
            vocabularies = (
                TokenVocabularies.from_json(vocab) if config.features is not None else None
            )
            labels = vocabularies.tags.items if vocabularies else list(vocab["tags"])
            model = build_layer_tagger(
                config, backbone.num_layers, backbone.hidden_size, labels, None, vocabularies
            )
            load_weights(directory, model)
            if config.backbone.finetune:
                model.backbone = backbone
            model.to(device)
            backbone.to(device)
            return cls(model, backbone, labels, config, meta["output_scheme"], vocabularies)

    @property
    def labels(self) -> list[str]:
        """The tags the model predicts, in the scheme it was trained in."""
        return list(self._labels)

    def save(self, path: str | Path) -> None:
        self.save_metadata(path)
        self.save_weights(path)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            KIND,
            self.config.to_dict(),
            self.vocabularies.to_json() if self.vocabularies else {"tags": self._labels},
            output_scheme=self.output_scheme,
            backbone=backbone_record(self.backbone),
        )

    def save_weights(self, path: str | Path) -> None:
        save_head_and_backbone(path, self.model, self.backbone, self.config.backbone.finetune)

    def word_states(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Flat word states ``(total_words, num_layers, hidden_size)`` of ``sentences``."""
        pieces = tokenize_words(self.backbone, sentences, self.config.backbone.max_length)
        pieces = pieces.to(next(self.backbone.parameters()).device)
        with torch.no_grad():
            return word_layer_states(self.backbone, pieces, self.config.subwords)

    def token_features(
        self, sentences: Sequence[Sequence[str]], device: torch.device | str
    ) -> TokenBatch | None:
        """The stacked token features of ``sentences``, or None when the tagger has none."""
        if self.vocabularies is None:
            return None
        encoded = [self.vocabularies.encode(tokens) for tokens in sentences]
        return collate_tokens(encoded, self.vocabularies).to(device)

    def tag_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None = None,
        states: torch.Tensor | None = None,
    ) -> list[list[str]]:
        """Tags for pre-tokenised sentences, in the output scheme, in input order.

        ``states``: the sentences' flat word states when already known (the feature cache).
        """
        analyses = self._analyse(sentences, batch_size, confidence=False, states=states)
        return [a.tags for a in analyses]

    @torch.no_grad()  # not inference mode: the CRF's marginals are a gradient
    def _analyse(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None,
        confidence: bool,
        top_k: int = 1,
        progress: bool = False,
        states: torch.Tensor | None = None,
    ) -> list[SentenceAnalysis]:
        batch_size = batch_size or self.config.backbone.batch_size
        starts = [0]
        for sentence in sentences:
            starts.append(starts[-1] + len(sentence))
        by_index: dict[int, SentenceAnalysis] = {}
        device = next(self.model.parameters()).device
        with evaluating(self.model):
            batches = bucket_batches([len(s) for s in sentences], batch_size, shuffle=False)
            for indices in shown(batches, progress):
                if any(not sentences[i] for i in indices):
                    raise ValueError("cannot tag an empty sentence")
                chosen = [sentences[i] for i in indices]
                lengths = [len(s) for s in chosen]
                if states is None:
                    words = self.word_states(chosen)
                else:
                    words = torch.cat([states[starts[i] : starts[i + 1]] for i in indices]).float()
                layers = pad_words(words.to(device), lengths)
                mask = (
                    torch.arange(max(lengths), device=device)[None, :]
                    < torch.tensor(lengths, device=device)[:, None]
                )
                batch = WordLayerBatch(mask, layers, tokens=self.token_features(chosen, device))
                analyses = analyse_batch(self.model, batch, confidence, top_k)
                for index, analysis in zip(indices, analyses, strict=True):
                    by_index[index] = in_output_scheme(analysis, self._labels, self.output_scheme)
        return [by_index[i] for i in range(len(sentences))]

    def score(
        self,
        sentences: Sequence[Sentence],
        path: str | Path = "<data>",
        states: torch.Tensor | None = None,
    ) -> EntityScores:
        """Score against gold tags; ``states``: the sentences' cached word states, if known."""

        def tag_tokens(tokens: Sequence[Sequence[str]]) -> list[list[str]]:
            return self.tag_tokens(tokens, states=states)

        return score_sentences(tag_tokens, self.labels, self.output_scheme, sentences, path)
