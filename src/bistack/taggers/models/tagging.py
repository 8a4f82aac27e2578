"""What every tagger does with its network's emissions, whatever computes them (PyTorch, or an
exported graph on onnxruntime): batches of similar length, the shared output math
(``TagDecoder``), predictions for raw text and pre-tokenised sentences, and scores against
gold tags, as conlleval computes them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from bistack.data.buckets import bucket_batches
from bistack.data.conll import Sentence
from bistack.data.tagged import read_tagged
from bistack.data.tokenize import sentences_of
from bistack.data.word_rows import Context, document_contexts
from bistack.devices.ahead import overlapped
from bistack.errors import DataError
from bistack.files.formats import shown
from bistack.inputs import texts_of, token_lists_of
from bistack.metrics.entities import EntityScores, score_entities, score_labels
from bistack.metrics.text import checked_temperature
from bistack.schemes import PLAIN, convert_tags
from bistack.taggers.emissions.consistency import consistent
from bistack.taggers.emissions.decoding import Analysis, TagDecoder
from bistack.taggers.models.formats import EntityTable
from bistack.taggers.models.records import (
    SentenceAnalysis,
    TaggedText,
    check_min_confidence,
    in_output_scheme,
    spaced_tokens,
    tagged_text,
)

# Emissions ``(batch, seq_len, num_tags)`` of a batch: its sentences' indices in the call, and
# the sentences. Float32 numpy, or a PyTorch tensor where a network computed them (left on its
# device, for a decoder that reads them there: see ``Tagging.decoded``).
Emitter = Callable[[Sequence[int], Sequence[Sequence[str]]], Any]


def host_array(scores: Any) -> np.ndarray:
    """Emissions as float32 numpy on the host: a numpy array as it is, a PyTorch tensor copied
    (without importing torch: an exported model's runtime never has one)."""
    if isinstance(scores, np.ndarray):
        return scores
    return scores.detach().float().cpu().numpy()


@dataclass(frozen=True)
class EmissionBatch:
    """Emissions ``(batch, seq_len, num_tags)`` of the sentences at ``indices`` of a call, row b
    real for its first ``lengths[b]`` positions: ``scores`` as the emitter gave them (on the
    network's device, maybe), ``emissions`` on the host (copied there once, when first read)."""

    indices: list[int]
    lengths: list[int]
    scores: Any

    @cached_property
    def emissions(self) -> np.ndarray:
        return host_array(self.scores)


class Tagging(ABC):
    """What every tagger does with its emissions: analyses in batches of similar length,
    predictions for raw text and pre-tokenised sentences, scores on a CoNLL file. A tagger
    supplies ``emissions`` (its network's pass over a batch), its ``decoder``, its
    ``output_scheme``, the batch size it predicts in, and a config with a CoNLL ``data``
    section."""

    config: Any
    output_scheme: str
    _calibration: dict[str, Any]  # see the ``calibration`` property
    # The last calibrated decoder, with the decoder, temperature and consistency it came from.
    _calibrated: tuple[TagDecoder, float, float, TagDecoder] | None = None

    @property
    @abstractmethod
    def decoder(self) -> TagDecoder:
        """What its emissions mean (labels, scheme, the CRF's scores)."""

    @property
    @abstractmethod
    def batch_size(self) -> int:
        """Sentences per forward pass when the caller does not say."""

    @abstractmethod
    def emissions(self, indices: Sequence[int], sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """Tag scores ``(batch, seq_len, num_tags)`` float32 of one batch of ``sentences`` (at
        ``indices`` of the call)."""

    def predicting(self) -> AbstractContextManager[Any]:
        """What a prediction runs inside (PyTorch: no gradients, the network in eval mode)."""
        return nullcontext()

    def prediction_table(
        self, delimiter: str, id_field: str | None, options: dict[str, Any]
    ) -> EntityTable:
        """``predict --format csv`` (or ``tsv``): a row an entity, with character offsets."""
        return EntityTable(delimiter, id_field)

    @property
    def device(self) -> str:
        """Where its network runs (``cpu``, ``cuda:0``...): an exported graph on the CPU."""
        return "cpu"

    def shared_parts(self) -> dict[str, Any]:
        """What another member of its ensemble takes when it opens, rather than load it again
        (a frozen backbone); the keywords of its class's ``from_saved``."""
        return {}

    def shared_stage_key(self) -> Hashable | None:
        """Equal for taggers whose first stage gives the same result on the same sentences (one
        frozen backbone read alike), so that an ensemble runs it once; None: none shared."""
        return None

    def shared_emitter(
        self,
        taggers: Sequence[Tagging],
        sentences: Sequence[Sequence[str]],
        documents: Sequence[Any] | None,
    ) -> Emitter:
        """The emissions of ``taggers`` (sharing this one's ``shared_stage_key``), side by side
        along the tag axis, their first stage run once (a tagger with a shared stage)."""
        raise NotImplementedError(f"{type(self).__name__} shares no first stage")

    @property
    def calibration(self) -> dict[str, Any]:
        """What was settled on dev after training (``temperature``, document ``consistency``,
        how they were measured), as config.json or export.json keeps it."""
        return self._calibration

    @calibration.setter
    def calibration(self, settled: dict[str, Any]) -> None:
        # Checked as it is set, so a damaged file is named when the model opens.
        checked_temperature(settled.get("temperature", 1.0))
        consistency = settled.get("consistency", 0.0)
        if (
            isinstance(consistency, bool)
            or not isinstance(consistency, int | float)
            or not (0 <= consistency <= 1)
        ):
            raise ValueError(f"consistency must be a probability in [0, 1], got {consistency!r}")
        self._calibration = settled

    @property
    def temperature(self) -> float:
        """What its confidences divide its scores by (1: as trained)."""
        return float(self.calibration.get("temperature", 1.0))

    @property
    def consistency(self) -> float:
        """The document consistency threshold it keeps (0: each sentence alone)."""
        return float(self.calibration.get("consistency", 0.0))

    def calibrated(self, decoder: TagDecoder) -> TagDecoder:
        """``decoder`` (its network's head's) with what was settled on dev after training: the
        temperature, and the document consistency threshold. Made again only when one of them
        changed, so that its tempered scores are computed once, not at every call."""
        temperature, consistency = self.temperature, self.consistency
        kept = self._calibrated
        if kept is None or kept[0] is not decoder or kept[1:3] != (temperature, consistency):
            made = replace(decoder, temperature=temperature, consistency=consistency)
            kept = self._calibrated = (decoder, temperature, consistency, made)
        return kept[3]

    @property
    def labels(self) -> list[str]:
        """The tags it predicts, in the scheme it was trained in."""
        return list(self.decoder.labels)

    def describe(self) -> dict[str, Any]:
        """What ``GET /info`` and ``bistack info`` say of its outputs."""
        labels = self.labels
        info: dict[str, Any] = {"labels": labels, "scheme": self.output_scheme}
        info["entity_types"] = sorted({label.partition("-")[2] for label in labels} - {""})
        if self.consistency:
            info["document_consistency"] = self.consistency
        return info

    def _analyse(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None,
        confidence: bool,
        top_k: int = 1,
        progress: bool = False,
        emitter: Emitter | None = None,
        documents: Sequence[Any] | None = None,
    ) -> list[SentenceAnalysis]:
        """Analyses in input order; without ``confidence``, the tags alone. ``emitter``: where
        the emissions come from, when not from the network's own pass (cached features);
        ``documents``: the document of each sentence (see ``emitter_of``; None: each sentence
        its own). A decoder with document consistency retypes unsure entities by the sure
        ones of their document (``bistack.taggers.emissions.consistency``)."""
        decoder = self.decoder
        documentwise = decoder.consistency > 0 and decoder.scheme != PLAIN
        by_index: dict[int, Analysis] = {}
        unsure: dict[int, np.ndarray] = {}  # emissions of sentences the rule may change
        batches = self.emission_batches(sentences, batch_size, progress, emitter, documents)
        several = len(sentences) > (self.batch_size if batch_size is None else batch_size)
        # On a GPU the next batch's network pass runs while this one's tags are decoded.
        for batch in overlapped(batches, self.device, several=several):
            analyses = self.decoded(decoder, batch, confidence or documentwise, top_k)
            for row, (index, analysis) in enumerate(zip(batch.indices, analyses, strict=True)):
                by_index[index] = analysis
                if documentwise and min(analysis.entities.values(), default=1.0) < (
                    decoder.consistency
                ):
                    unsure[index] = batch.emissions[row, : batch.lengths[row]]
        ordered = [by_index[i] for i in range(len(sentences))]
        if documentwise:
            named = list(documents) if documents is not None else list(range(len(sentences)))
            ordered = consistent(decoder, ordered, sentences, named, unsure)
        return in_output_scheme(ordered, decoder.labels, self.output_scheme)

    def decoded(
        self, decoder: TagDecoder, batch: EmissionBatch, confidence: bool, top_k: int
    ) -> list[Analysis]:
        """``decoder``'s analyses of one batch (``TagDecoder.analyse``), on the host."""
        return decoder.analyse(batch.emissions, batch.lengths, confidence, top_k)

    def emission_batches(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None = None,
        progress: bool = False,
        emitter: Emitter | None = None,
        documents: Sequence[Any] | None = None,
    ) -> Iterator[EmissionBatch]:
        """The network's emissions of ``sentences``, a batch of similar lengths at a time."""
        emitter = emitter or self.emitter_of(sentences, documents)
        batches = bucket_batches(
            [len(s) for s in sentences],
            self.batch_size if batch_size is None else batch_size,
            shuffle=False,
        )
        with self.predicting():
            for indices in shown(batches, progress):
                chosen = [sentences[i] for i in indices]
                if any(not sentence for sentence in chosen):
                    raise ValueError("cannot tag an empty sentence")
                lengths = [len(sentence) for sentence in chosen]
                yield EmissionBatch(list(indices), lengths, emitter(indices, chosen))

    def emitter_of(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[Any] | None
    ) -> Emitter:
        """Where the emissions of ``sentences`` come from: the network's pass over each batch.
        A tagger that reads document context (its backbone's ``context``) reads each
        sentence's neighbours in this call of the same document (``documents[i]``, in order;
        None: each sentence alone)."""
        return self.emissions

    def analyse_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None = None,
        top_k: int = 1,
        progress: bool = False,
        documents: Sequence[Any] | None = None,
        emitter: Emitter | None = None,
    ) -> list[SentenceAnalysis]:
        """Tags of pre-tokenised sentences with each token's and each entity's confidence, and
        the ``top_k`` best analyses of each sentence when ``top_k`` > 1; ``documents``: each
        sentence's document, for a tagger that reads document context; ``emitter``: where the
        emissions come from when not from the network's own pass (cached features)."""
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        sentences = token_lists_of(sentences)
        return self._analyse(sentences, batch_size, True, top_k, progress, emitter, documents)

    def tag_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None = None,
        documents: Sequence[Any] | None = None,
    ) -> list[list[str]]:
        """Tags for pre-tokenised sentences, in the output scheme, in input order."""
        sentences = token_lists_of(sentences)  # a token that is not a string: named
        analyses = self._analyse(sentences, batch_size, confidence=False, documents=documents)
        return [a.tags for a in analyses]

    def score(self, sentences: Sequence[Sentence], path: str | Path = "<data>") -> EntityScores:
        """Entity scores against the sentences' gold tags, both written in the output scheme."""
        return score_sentences(self.tag_tokens, self.labels, self.output_scheme, sentences, path)

    def predict(
        self,
        texts: Sequence[str],
        min_confidence: float | None = None,
        batch_size: int | None = None,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[TaggedText]:
        """Tokenise raw ``texts`` (a single string is one text) and tag them: for each text, its
        sentences with entities and their confidences; ``min_confidence`` leaves out entities
        below it; ``batch_size`` sentences per forward pass; ``top_k`` > 1 adds each sentence's
        ``top_k`` best analyses with their probabilities; ``progress`` shows a bar."""

        def analyse(
            sentences: Sequence[Sequence[str]], documents: Sequence[int]
        ) -> list[SentenceAnalysis]:
            return self.analyse_tokens(sentences, batch_size, top_k, progress, documents)

        tokenizer = self.config.data.tokenizer
        return self._with_conllu_field(predict_texts(analyse, texts, min_confidence, tokenizer))

    def predict_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        min_confidence: float | None = None,
        batch_size: int | None = None,
        top_k: int = 1,
        progress: bool = False,
        documents: Sequence[Any] | None = None,
        emitter: Emitter | None = None,
    ) -> list[TaggedText]:
        """Tag pre-tokenised sentences, one tag per given token (as ``predict`` does raw
        text); each result's text is its tokens joined by single spaces, which the offsets
        index. ``documents``: each sentence's document, for a tagger that reads document
        context (None: each sentence alone); ``emitter``: the emissions of the sentences
        (none of them blank) from elsewhere (cached features)."""
        check_min_confidence(min_confidence)
        sentences = token_lists_of(sentences)
        kept = [i for i, tokens in enumerate(sentences) if tokens]  # a blank line: no sentence
        if emitter is not None and len(kept) < len(sentences):
            raise ValueError("an emitter reads sentences by their place: none may be blank")
        words = [sentences[i] for i in kept]
        given = None if documents is None else list(documents)
        named = None if given is None else [given[i] for i in kept]
        analyses = iter(
            self.analyse_tokens(words, batch_size, top_k, progress, named, emitter) if words else []
        )
        spaced = [[spaced_tokens(tokens)] if tokens else [] for tokens in sentences]
        return self._with_conllu_field(
            tagged_text(" ".join(tokens), sentence, analyses, min_confidence)
            for tokens, sentence in zip(sentences, spaced, strict=True)
        )

    @property
    def conllu_field(self) -> str:
        """Where CoNLL-U output puts tags: the column plain tags were trained from (``upos``,
        ``xpos``...), MISC's ``NER=`` for entity tags."""
        return str(self.config.data.tag_field) if self.output_scheme == PLAIN else "misc:NER"

    def _with_conllu_field(self, results: Iterable[TaggedText]) -> list[TaggedText]:
        """Each result told where its CoNLL-U output puts the tags (:attr:`conllu_field`)."""
        field = self.conllu_field
        return [replace(result, conllu_field=field) for result in results]

    def evaluate(self, path: str | Path) -> EntityScores:
        """Score the tagger on a labelled CoNLL file, as conlleval does."""
        return self.score(read_tagged(path, self.config.data), path)


# Analyses of pre-tokenised sentences, given the document of each.
AnalyseTokens = Callable[[Sequence[Sequence[str]], Sequence[int]], list[SentenceAnalysis]]
TagTokens = Callable[..., list[list[str]]]  # (sentences, documents=...) -> tags


def context_emitter(
    emit: Callable[[Sequence[Sequence[str]], Sequence[Context]], Any],
    sentences: Sequence[Sequence[str]],
    documents: Sequence[Any] | None,
    context: int,
) -> Emitter:
    """An emitter whose batches ``emit`` each sentence with the words around it in its document
    (``documents[i]``; None: each sentence its own): up to ``context`` words a side, which
    bounds the ``context`` subwords a row reads."""
    named = list(documents) if documents is not None else list(range(len(sentences)))
    contexts = document_contexts(sentences, named, context)
    return lambda indices, chosen: emit(chosen, [contexts[i] for i in indices])


def predict_texts(
    analyse_tokens: AnalyseTokens,
    texts: Sequence[str],
    min_confidence: float | None = None,
    tokenizer: str = "text",
) -> list[TaggedText]:
    """Split raw ``texts`` into sentences of tokens with ``tokenizer`` (the model's
    ``data.tokenizer``) and analyse every sentence in one batched call (the sentences of one
    text are one document); a single string is one text (a list of one result comes back), any
    iterable of strings is read once."""
    check_min_confidence(min_confidence)
    texts = texts_of(texts)
    tokenized = [sentences_of(text, tokenizer) for text in texts]
    flat = [[token.text for token in sentence] for doc in tokenized for sentence in doc]
    documents = [number for number, doc in enumerate(tokenized) for _ in doc]
    analyses = iter(analyse_tokens(flat, documents) if flat else [])
    return [
        tagged_text(text, doc, analyses, min_confidence)
        for text, doc in zip(texts, tokenized, strict=True)
    ]


def check_known_types(
    sentences: Sequence[Sentence], labels: Sequence[str], path: str | Path
) -> None:
    """Raise DataError at the first entity type the model never saw in training (``labels``)."""
    known = {label.partition("-")[2] for label in labels}
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            entity_type = tag.partition("-")[2]
            if entity_type and entity_type not in known:
                raise DataError(
                    path,
                    f"entity type {entity_type!r} (tag {tag!r}) never appeared in training; "
                    f"known types: {', '.join(sorted(known - {''}))}",
                    sentence.line + offset,
                )


def score_sentences(
    tag_tokens: TagTokens,
    labels: Sequence[str],
    output_scheme: str,
    sentences: Sequence[Sentence],
    path: str | Path,
) -> EntityScores:
    """Entity scores as conlleval computes them, gold and predicted tags both written in the
    output scheme; an entity type unseen in training is an error naming its line."""
    check_gold_tags(sentences, labels, output_scheme, path)
    tokens = [s.tokens for s in sentences]
    documents = [s.document for s in sentences]
    if output_scheme == PLAIN:
        return score_labels([s.tags for s in sentences], tag_tokens(tokens, documents=documents))
    predicted = tag_tokens(tokens, documents=documents)
    gold = [convert_tags(s.tags, output_scheme) for s in sentences]
    return score_entities(gold, predicted)


def check_gold_tags(
    sentences: Sequence[Sentence], labels: Sequence[str], scheme: str, path: str | Path
) -> None:
    """Raise DataError at the first gold tag (plain tags) or entity type the model never saw."""
    if scheme == PLAIN:
        check_known_tags(sentences, labels, path)
    else:
        check_known_types(sentences, labels, path)


def check_known_tags(
    sentences: Sequence[Sentence], labels: Sequence[str], path: str | Path
) -> None:
    """Raise DataError at the first plain tag the model never saw in training (``labels``)."""
    known = set(labels)
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            if tag not in known:
                raise DataError(
                    path,
                    f"tag {tag!r} never appeared in training; known tags: "
                    f"{', '.join(sorted(known))}",
                    sentence.line + offset,
                )
