"""What every tagger shares: its predictions (``TaggedText``: sentences, tags, entities with
character offsets and confidences) and how it is scored against gold tags, as conlleval
scores them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from bistack.analysis import Analysis, Span
from bistack.data.conll import Sentence, write_conll
from bistack.data.conllu import write_conllu
from bistack.data.spans import doccano_record
from bistack.data.tagged import read_tagged
from bistack.data.tokenize import Token, tokenize
from bistack.errors import DataError
from bistack.metrics.entities import EntityScores, score_entities, score_labels
from bistack.schemes import PLAIN, convert_tags, spans_from_tags


@dataclass(frozen=True)
class Entity:
    """An entity found in raw text: ``text[start:end]`` is ``text``."""

    text: str
    type: str
    start: int
    end: int
    # The probability, under the model, that this span is an entity of this type (exact for a
    # CRF trained in BIOES or BIO; see bistack.confidence).
    confidence: float | None = None


@dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a raw text: its tokens (with offsets), tags and entities, and each
    token's probability of its tag (its CRF marginal, or its softmax probability)."""

    tokens: list[Token]
    tags: list[str]
    entities: list[Entity]
    confidences: list[float] = field(default_factory=list)
    # The best analyses of the whole sentence, best first, with their probabilities (asked for
    # with top_k; the first is ``tags``).
    alternatives: list[tuple[list[str], float]] = field(default_factory=list)


@dataclass(frozen=True)
class TaggedText(Sequence[TaggedSentence]):
    """A raw text and its tagged sentences; iterating it gives the sentences."""

    text: str
    sentences: list[TaggedSentence]
    # Where CoNLL-U output puts each tag: MISC's NER= for entity tags, or the column a tagger
    # of plain tags was trained on (upos, xpos...).
    conllu_field: str = "misc:NER"

    @overload
    def __getitem__(self, index: int) -> TaggedSentence: ...
    @overload
    def __getitem__(self, index: slice) -> list[TaggedSentence]: ...
    def __getitem__(self, index: int | slice) -> TaggedSentence | list[TaggedSentence]:
        return self.sentences[index]

    def __len__(self) -> int:
        return len(self.sentences)

    def __iter__(self) -> Iterator[TaggedSentence]:
        return iter(self.sentences)

    @property
    def entities(self) -> list[Entity]:
        return [entity for sentence in self.sentences for entity in sentence.entities]

    def to_json(self) -> dict[str, Any]:
        tokens = []
        for s in self.sentences:
            confidences = s.confidences or [None] * len(s.tokens)
            for t, tag, c in zip(s.tokens, s.tags, confidences, strict=True):
                tokens.append(
                    {"text": t.text, "start": t.start, "end": t.end, "tag": tag, "confidence": c}
                )
        entities = [entity.__dict__ for entity in self.entities]
        record = {"text": self.text, "entities": entities, "tokens": tokens}
        if any(s.alternatives for s in self.sentences):
            record["alternatives"] = [
                [{"tags": tags, "probability": p} for tags, p in s.alternatives]
                for s in self.sentences
            ]
        return record

    def to_conll(self) -> str:
        """``token<TAB>tag`` lines, a blank line after each sentence."""
        return write_conll(
            [Sentence([t.text for t in s.tokens]) for s in self.sentences],
            [s.tags for s in self.sentences],
        )

    def to_conllu(self) -> str:
        """CoNLL-U: each sentence with its ``# text``, the tags in ``conllu_field``."""
        texts = [" ".join(self.text[s.tokens[0].start : s.tokens[-1].end].split()) for s in self]
        return write_conllu(
            [([t.text for t in s.tokens], s.tags) for s in self.sentences],
            self.conllu_field,
            texts,
        )

    def to_doccano(self) -> dict[str, Any]:
        """The text and its entities as doccano imports them: ``{"text", "label": [[start,
        end, type], ...]}``, so predictions can be corrected in an annotation tool."""
        return doccano_record(self.text, [(e.start, e.end, e.type) for e in self.entities])

    def to_huggingface(self) -> list[dict[str, Any]]:
        """The entities as a HuggingFace token-classification pipeline returns them with
        ``aggregation_strategy="simple"``: ``entity_group``, ``score``, ``word``, ``start``,
        ``end`` (``score`` is the entity's confidence, None when it was not computed)."""
        return [
            {
                "entity_group": e.type,
                "score": e.confidence,
                "word": e.text,
                "start": e.start,
                "end": e.end,
            }
            for e in self.entities
        ]

    def to_spacy(self, nlp_or_vocab: Any = None) -> Any:
        """A spaCy ``Doc`` of this text's tokens (with their whitespace), its entities as
        ``doc.ents`` and each token's tag as ``token.tag_`` (needs ``bistack[spacy]``).
        ``nlp_or_vocab``: a pipeline or vocabulary to share; default, a blank one."""
        try:
            from spacy.tokens import Doc
            from spacy.vocab import Vocab
        except ImportError:
            raise ImportError("to_spacy needs spaCy: pip install 'bistack[spacy]'") from None
        vocab = getattr(nlp_or_vocab, "vocab", nlp_or_vocab) or Vocab()
        words: list[str] = []
        spaces: list[bool] = []
        tags: list[str] = []
        starts: list[bool] = []

        def gap(text: str) -> None:  # what lies between tokens, as spaCy keeps it
            if text.startswith(" ") and words:
                spaces[-1], text = True, text[1:]
            if text:
                words.append(text)
                spaces.append(False)
                tags.append("_SP")
                starts.append(not starts)

        position = 0
        for sentence in self.sentences:
            for index, (token, tag) in enumerate(zip(sentence.tokens, sentence.tags, strict=True)):
                gap(self.text[position : token.start])
                words.append(token.text)
                spaces.append(False)
                tags.append(tag)
                # a sentence starts at its first token, unless leading whitespace started it
                starts.append(index == 0 and (position > 0 or not starts))
                position = token.end
        gap(self.text[position:])
        doc = Doc(vocab, words=words, spaces=spaces, tags=tags, sent_starts=starts)
        ents = []
        for entity in self.entities:
            span = doc.char_span(entity.start, entity.end, label=entity.type)
            if span is None:  # entities lie on token boundaries; anything else is a bug here
                raise ValueError(f"entity {entity.text!r} does not fall on the Doc's tokens")
            ents.append(span)
        doc.ents = ents
        return doc


@dataclass(frozen=True)
class SentenceAnalysis:
    """A tagged sentence before it meets its text: tags in the output scheme, each token's
    confidence, and the confidence of each entity span."""

    tags: list[str]
    confidences: list[float]
    entities: dict[Span, float]
    alternatives: list[tuple[list[str], float]] = field(default_factory=list)
    plain: bool = False  # tags are labels of their own (parts of speech): no entities


def in_output_scheme(analysis: Analysis, labels: Sequence[str], scheme: str) -> SentenceAnalysis:
    """``analysis`` (tag ids in the model's scheme) with its tags converted to ``scheme``; spans
    and confidences carry over, since a conversion keeps every span."""

    def named(path: Sequence[int]) -> list[str]:
        return convert_tags([labels[t] for t in path], scheme)

    alternatives = [(named(path), p) for path, p in analysis.alternatives]
    return SentenceAnalysis(
        named(analysis.path),
        analysis.token_confidence,
        analysis.entities,
        alternatives,
        plain=scheme == PLAIN,
    )


def tagged_text(
    text: str,
    sentences: Sequence[Sequence[Token]],
    analyses: Iterator[SentenceAnalysis],
    min_confidence: float | None = None,
) -> TaggedText:
    """Assemble a text's tagged sentences, each taking the next analysis, with entity offsets
    into ``text``; entities below ``min_confidence`` are left out (their tags stay)."""
    tagged = []
    for tokens in sentences:
        analysis = next(analyses)
        entities = []
        for s in [] if analysis.plain else spans_from_tags(analysis.tags):
            confidence = analysis.entities.get((s.start, s.end, s.label))
            if min_confidence is not None and (confidence or 0.0) < min_confidence:
                continue
            start, end = tokens[s.start].start, tokens[s.end - 1].end
            entities.append(Entity(text[start:end], s.label, start, end, confidence))
        tagged.append(
            TaggedSentence(
                list(tokens), analysis.tags, entities, analysis.confidences, analysis.alternatives
            )
        )
    return TaggedText(text, tagged)


def analyse_batch(model: Any, batch: Any, confidence: bool, top_k: int = 1) -> list[Analysis]:
    """A tagging network's analysis of a batch; without ``confidence``, the Viterbi tags only
    (what scoring needs, at decoding's cost)."""
    if confidence:
        return model.analyse(batch, top_k)
    lengths = batch.mask.sum(dim=1).tolist()
    paths = model.decode(batch).tolist()
    return [Analysis(path[:length], [], {}) for path, length in zip(paths, lengths, strict=True)]


class Tagging(ABC):
    """What every tagger does with its analyses, whatever computes them: predictions for raw
    text and scores on a CoNLL file. A tagger supplies ``_analyse`` (its batched network pass),
    its ``labels``, its ``output_scheme`` and a config with a CoNLL ``data`` section."""

    config: Any
    output_scheme: str
    labels: Any  # the tags it predicts, in the scheme it was trained in

    @abstractmethod
    def _analyse(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None,
        confidence: bool,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[SentenceAnalysis]:
        """Analyses in input order; without ``confidence``, the tags alone."""

    def analyse_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None = None,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[SentenceAnalysis]:
        """Tags of pre-tokenised sentences with each token's and each entity's confidence, and
        the ``top_k`` best analyses of each sentence when ``top_k`` > 1."""
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        return self._analyse(sentences, batch_size, confidence=True, top_k=top_k, progress=progress)

    def tag_tokens(
        self, sentences: Sequence[Sequence[str]], batch_size: int | None = None
    ) -> list[list[str]]:
        """Tags for pre-tokenised sentences, in the output scheme, in input order."""
        return [a.tags for a in self._analyse(sentences, batch_size, confidence=False)]

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

        def analyse(sentences: Sequence[Sequence[str]]) -> list[SentenceAnalysis]:
            return self.analyse_tokens(sentences, batch_size, top_k, progress)

        return self._placed(predict_texts(analyse, texts, min_confidence))

    def predict_tokens(
        self,
        sentences: Sequence[Sequence[str]],
        min_confidence: float | None = None,
        batch_size: int | None = None,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[TaggedText]:
        """Tag pre-tokenised sentences, one tag per given token (as ``predict`` does raw
        text); each result's text is its tokens joined by single spaces, which the offsets
        index."""
        words = [list(tokens) for tokens in sentences if tokens]  # a blank line has no sentence
        analyses = iter(self.analyse_tokens(words, batch_size, top_k, progress) if words else [])
        placed = [[spaced_tokens(tokens)] if tokens else [] for tokens in sentences]
        return self._placed(
            tagged_text(" ".join(tokens), sentence, analyses, min_confidence)
            for tokens, sentence in zip(sentences, placed, strict=True)
        )

    @property
    def conllu_field(self) -> str:
        """Where CoNLL-U output puts tags: the column plain tags were trained from (``upos``,
        ``xpos``...), MISC's ``NER=`` for entity tags."""
        data = getattr(self.config, "data", None)
        if self.output_scheme == PLAIN and data is not None:
            return str(getattr(data, "tag_field", "upos"))
        return "misc:NER"

    def _placed(self, results: Iterable[TaggedText]) -> list[TaggedText]:
        field = self.conllu_field
        return [replace(result, conllu_field=field) for result in results]

    def evaluate(self, path: str | Path) -> EntityScores:
        """Score the tagger on a labelled CoNLL file, as conlleval does."""
        return self.score(read_tagged(path, self.config.data), path)


AnalyseTokens = Callable[[Sequence[Sequence[str]]], list[SentenceAnalysis]]
TagTokens = Callable[[Sequence[Sequence[str]]], list[list[str]]]


def predict_texts(
    analyse_tokens: AnalyseTokens, texts: Sequence[str], min_confidence: float | None = None
) -> list[TaggedText]:
    """Tokenise raw ``texts`` and analyse every sentence in one batched call; a single string
    is one text (a list of one result comes back)."""
    if isinstance(texts, str):
        texts = [texts]
    tokenized = [tokenize(text) for text in texts]
    flat = [[token.text for token in sentence] for doc in tokenized for sentence in doc]
    analyses = iter(analyse_tokens(flat) if flat else [])
    return [
        tagged_text(text, doc, analyses, min_confidence)
        for text, doc in zip(texts, tokenized, strict=True)
    ]


def spaced_tokens(tokens: Sequence[str]) -> list[Token]:
    """``tokens`` with their offsets in the text that joins them by single spaces."""
    placed, start = [], 0
    for token in tokens:
        placed.append(Token(token, start, start + len(token)))
        start += len(token) + 1
    return placed


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
    if output_scheme == PLAIN:
        return score_labels([s.tags for s in sentences], tag_tokens([s.tokens for s in sentences]))
    predicted = tag_tokens([s.tokens for s in sentences])
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
