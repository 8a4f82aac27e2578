"""Train a tagger over a transformer's word-level states (layer mix + BiLSTM + CRF), alone or
stacked with the words' own features (word embedding, characters, casing).

Frozen backbone: every word's per-layer states are computed once and cached (float16, which
halves the cache; the tagger computes in float32), so an epoch costs about what the recurrent
tagger's does. Fine-tuned: the backbone runs every step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import torch
from torch import Tensor

from bistack.config import FeaturesConfig
from bistack.data.batching import PAD_TAG, collate_encoded
from bistack.data.conll import Sentence
from bistack.data.features import EncodedSentence, TokenVocabularies, tag_order
from bistack.data.word_rows import WORD_SEPARATOR, sentence_contexts
from bistack.devices.choice import moved_to
from bistack.metrics.dev import Evaluation
from bistack.models.backbone import TransformerBackbone
from bistack.models.boundary import freeze_below_top
from bistack.models.feature_cache import cached_rows, model_fingerprint
from bistack.models.frozen_pass import FrozenPass
from bistack.models.word_pieces import tokenize_words, word_layer_states
from bistack.runs.driver import Prepared
from bistack.runs.loop import Run
from bistack.runs.vocabularies import build_vocabularies, initialise_words, singleton_mask
from bistack.schemes import PLAIN, convert_tags
from bistack.system.heartbeat import Heartbeat
from bistack.taggers.boundary import TaggerBottom
from bistack.taggers.config import LayerPoolingTaggerConfig
from bistack.taggers.models.layer_tagger import LayerPoolingTagger
from bistack.taggers.models.tagging import Emitter, check_gold_tags
from bistack.taggers.networks.layer_network import WordLayerBatch, build_layer_tagger, pad_words
from bistack.taggers.recipe import (
    TaggingData,
    card_notes,
    finish_tagger,
    load_tagging_data,
    tagging_evaluation,
)


def cached_word_states(
    backbone: TransformerBackbone,
    config: LayerPoolingTaggerConfig,
    sentences: Sequence[Sentence],
    say: Callable[[str], None],
    device: str | torch.device = "cpu",
) -> Tensor:
    """Flat word states ``(total_words, num_layers, hidden_size)`` float16, from the cache,
    computed on a miss on ``device`` (the run's: a GPU computes them at its own speed), each
    batch's states brought to the host once."""
    options = config.backbone
    limit = backbone.limit(options.max_length)
    contexts = sentence_contexts(sentences, options.context)
    frozen = FrozenPass.of(options)

    def compute(indices: list[int]) -> dict[str, list[Tensor]]:
        # Batches of similar length (little padding), written back in the order asked.
        order = sorted(range(len(indices)), key=lambda i: len(sentences[indices[i]].tokens))
        per_sentence: list[Tensor] = [torch.empty(0)] * len(indices)
        beat = Heartbeat("backbone", len(indices), "sentences", say)
        with torch.inference_mode(), moved_to(backbone, device):
            for start in range(0, len(order), options.batch_size):
                chosen = order[start : start + options.batch_size]
                beat.update(len(chosen))
                around = None if contexts is None else [contexts[indices[i]] for i in chosen]
                tokens = [sentences[indices[i]].tokens for i in chosen]
                pieces = tokenize_words(backbone, tokens, limit, around, options.context)
                words = word_layer_states(backbone, pieces.to(device), config.subwords, frozen)
                words = words.half().cpu()
                for i, part in zip(chosen, words.split(pieces.lengths), strict=True):
                    per_sentence[i] = part
        return {"words": per_sentence}

    started = time.perf_counter()
    texts = [WORD_SEPARATOR.join(s.tokens) for s in sentences]
    settings = frozen.cache_settings({"max_length": limit, "subwords": config.subwords})
    if contexts is not None:  # each sentence's states depend on its document's other sentences
        texts = [
            f"{s.document}{WORD_SEPARATOR}{text}" for s, text in zip(sentences, texts, strict=True)
        ]
        settings["context"] = options.context
    cached = cached_rows(
        options.cache_dir,
        model_fingerprint(backbone.folder),
        texts,
        settings | {"kind": "word_states"},
        compute,
    )
    seconds = time.perf_counter() - started
    said = f"word states of {len(sentences)} sentences {cached.said} in {seconds:.0f} s"
    say(f"{said} ({cached.path})")
    return torch.cat(cached.rows["words"])


class WordStatesByLine:
    """The word states of a file's sentences ``(total_words, num_layers, hidden_size)``,
    computed once and handed out by sentence (known by the line it starts at, the same in
    every process): cross-validation's folds take their sentences' rows instead of each
    computing (and caching) the backbone over its own share of the file."""

    def __init__(self, sentences: Sequence[Sentence], states: Tensor) -> None:
        self.states = states
        self.rows: dict[int, tuple[int, int]] = {}  # line -> (first word row, words)
        start = 0
        for sentence in sentences:
            self.rows[sentence.line] = (start, len(sentence.tokens))
            start += len(sentence.tokens)

    def __call__(self, sentences: Sequence[Sentence]) -> Tensor:
        """The word states of ``sentences``, in their order."""
        index = torch.cat(
            [torch.arange(start, start + n) for start, n in (self.rows[s.line] for s in sentences)]
        )
        return self.states.index_select(0, index)


class WordLayerTask:
    """Batches of cached word states (frozen), of a cached bottom (top K layers trained) or of
    subwords (fine-tuned whole), and dev scoring."""

    def __init__(
        self,
        tagger: LayerPoolingTagger,
        data: TaggingData,
        tag_ids: list[list[int]],
        run: Run,
        train_states: Tensor | None,
        dev_states: Tensor | None,
        encoded: list[EncodedSentence] | None = None,
        bottoms: tuple[TaggerBottom, TaggerBottom] | None = None,
    ) -> None:
        self.tagger = tagger
        # With the top K trained, the training and dev sentences' frozen bottoms
        self.bottom: TaggerBottom | None = None if bottoms is None else bottoms[0]
        self.dev_bottom: TaggerBottom | None = None if bottoms is None else bottoms[1]
        self.data = data
        self.tag_ids = tag_ids
        self.encoded = encoded  # the training sentences' token features, when stacked
        self.train_states = train_states
        self.dev_states = dev_states
        self.contexts = sentence_contexts(data.train, tagger.config.backbone.context)
        self.starts = [0]
        for sentence in data.train:
            self.starts.append(self.starts[-1] + len(sentence.tokens))

    def train_lengths(self) -> Sequence[int]:
        return [len(s.tokens) for s in self.data.train]

    def collate(self, indices: list[int]) -> WordLayerBatch:
        lengths = [len(self.data.train[i].tokens) for i in indices]
        tags = torch.full((len(lengths), max(lengths)), PAD_TAG, dtype=torch.long)
        for row, index in enumerate(indices):
            tags[row, : lengths[row]] = torch.tensor(self.tag_ids[index])
        tokens = None
        if self.encoded is not None:
            vocabularies = self.tagger.vocabularies
            assert vocabularies is not None
            tokens = collate_encoded([self.encoded[i] for i in indices], vocabularies)
        if self.bottom is not None:
            bottom = self.bottom.batch(indices)
            return WordLayerBatch.of_lengths(lengths, bottom=bottom, tags=tags, tokens=tokens)
        if self.train_states is None:
            chosen = [self.data.train[i].tokens for i in indices]
            options = self.tagger.config.backbone
            around = None if self.contexts is None else [self.contexts[i] for i in indices]
            pieces = tokenize_words(
                self.tagger.backbone, chosen, options.max_length, around, options.context
            )
            return WordLayerBatch.of_lengths(lengths, pieces=pieces, tags=tags, tokens=tokens)
        words = torch.cat([self.train_states[self.starts[i] : self.starts[i + 1]] for i in indices])
        layers = pad_words(words, lengths)
        return WordLayerBatch.of_lengths(lengths, layers=layers, tags=tags, tokens=tokens)

    def evaluate(self) -> Evaluation:
        states = self.dev_states
        if self.dev_bottom is not None:  # the top K layers run from dev's cached bottom
            states = self.dev_bottom.word_states(self.tagger.config.subwords)
        scores = self.tagger.score(self.data.dev, self.data.dev_source, states=states)
        return tagging_evaluation(scores, self.tagger.output_scheme == PLAIN)

    def save_weights(self, directory: Path) -> None:
        self.tagger.save_weights(directory)


def prepare_layer_tagger(
    config: LayerPoolingTaggerConfig,
    run: Run,
    data: TaggingData | None = None,
    backbone: TransformerBackbone | None = None,
    word_states_of: WordStatesByLine | None = None,
) -> Prepared:
    """The tagger over transformer layers that ``config`` describes; ``data``: train and dev
    sentences already chosen (cross-validation's folds), ``backbone``: a frozen one already
    loaded, ``word_states_of``: its word states of every sentence they are drawn from (both
    shared by the folds)."""
    data = data or load_tagging_data(config)
    for note in data.notes:
        run.say(note)
    if backbone is None or config.backbone.finetune:  # a fine-tuned one starts afresh
        backbone = TransformerBackbone.load(config.backbone.path)
    train_tags = [convert_tags(s.tags, config.data.scheme) for s in data.train]
    labels = tag_order(tag for tags in train_tags for tag in tags)
    check_gold_tags(data.dev, labels, config.data.scheme, data.dev_source)
    vocabularies, vectors, encoded, singletons = None, None, None, None
    features = config.features
    if features is not None:
        pairs = [(s.tokens, tags) for s, tags in zip(data.train, train_tags, strict=True)]
        vocabularies, vectors = build_vocabularies(features, pairs)
        singletons = singleton_mask(vocabularies, pairs)
        encoded = [vocabularies.encode(tokens) for tokens, _ in pairs]
    model = build_layer_tagger(
        config,
        backbone.num_layers,
        backbone.hidden_size,
        labels,
        backbone,
        vocabularies,
        singletons,
    )
    if model.embedder is not None and vocabularies is not None and features is not None:
        run.say(
            initialise_words(
                model.embedder,
                features,
                vocabularies,
                vectors,
                (t for s in data.train for t in s.tokens),
                (t for s in data.dev for t in s.tokens),
            )
        )
    tagger = LayerPoolingTagger(model, backbone, labels, config, data.input_scheme, vocabularies)
    bottoms = top_layers_bottoms(config, backbone, data, run)
    train_states = dev_states = None
    if not config.backbone.finetune and word_states_of is not None:
        train_states, dev_states = word_states_of(data.train), word_states_of(data.dev)
    elif not config.backbone.finetune:
        device = run.fabric.device
        train_states = cached_word_states(backbone, config, data.train, run.say, device)
        dev_states = cached_word_states(backbone, config, data.dev, run.say, device)
    dev_tokens = [s.tokens for s in data.dev]

    def cached_dev(best: LayerPoolingTagger) -> Emitter | None:
        return None if dev_states is None else best.cached(dev_tokens, dev_states)

    index = {label: i for i, label in enumerate(labels)}
    tag_ids = [[index[t] for t in tags] for tags in train_tags]
    mode = config.backbone.described()
    return Prepared(
        model=tagger,
        network=model,
        parameter_groups=model.parameter_groups,
        loop=WordLayerTask(tagger, data, tag_ids, run, train_states, dev_states, encoded, bottoms),
        # A frozen backbone is this run's own, unchanged: the best head joins it (not a copy).
        finish=lambda run: finish_tagger(
            partial(LayerPoolingTagger.load, backbone=backbone), data, run, cached_dev
        ),
        notes=card_notes(config),
        summary=(
            f"train: {len(data.train)} sentences ({data.input_scheme}, trained as "
            f"{config.data.scheme}); dev: {len(data.dev)} from {data.dev_source}; backbone "
            f"{config.backbone.named(backbone.folder)} ({backbone.num_layers} layers, {mode}, "
            f"{config.subwords} "
            f"subword, {config.layer_mix.type} layer mix){stacked_summary(vocabularies, features)}"
            f"; {len(labels)} tags"
        ),
    )


def top_layers_bottoms(
    config: LayerPoolingTaggerConfig,
    backbone: TransformerBackbone,
    data: TaggingData,
    run: Run,
) -> tuple[TaggerBottom, TaggerBottom] | None:
    """With ``backbone.finetune`` a number K of top layers: the backbone's layers below frozen
    and their output for the training and the dev sentences, from the cache or computed on the
    run's device; None for a backbone frozen or fine-tuned whole (K its number of layers too)."""
    boundary = freeze_below_top(backbone, config.backbone.top_layers)
    if boundary is None:
        return None
    frozen = FrozenPass.of(config.backbone)
    with moved_to(backbone, run.fabric.device):
        return (
            TaggerBottom(backbone, boundary, config, data.train, frozen, run.say),
            TaggerBottom(backbone, boundary, config, data.dev, frozen, run.say),
        )


def stacked_summary(vocabularies: TokenVocabularies | None, features: FeaturesConfig | None) -> str:
    """What is stacked beside the transformer's states, for the run's summary line."""
    if vocabularies is None or features is None:
        return ""
    parts = []
    if features.word_dim:
        parts.append(f"{len(vocabularies.words)} words x {features.word_dim}")
    if features.char_encoder != "none":
        parts.append(f"{features.char_encoder} chars")
    if features.casing_dim:
        parts.append("casing")
    return " + " + " + ".join(parts)
