"""What a tagger predicts, as plain data: a raw text's sentences with their tokens (and
offsets), tags, entities and confidences (``TaggedText``), and the ways it is written out
(JSON, CoNLL, CoNLL-U, doccano, a HuggingFace pipeline's dicts, a spaCy ``Doc``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from bistack.data.conll import Sentence, write_conll
from bistack.data.conllu import write_conllu
from bistack.data.spans import doccano_record
from bistack.data.tokenize import Token
from bistack.errors import needs_extra
from bistack.schemes import PLAIN, spans_from_tags
from bistack.taggers.emissions.decoding import Analysis, Span
from bistack.taggers.emissions.scheme_table import scheme_table

OUTSIDE = "O"  # the tag of a token in no entity


@dataclass(frozen=True)
class Entity:
    """An entity found in raw text: ``text[start:end]`` is ``text``."""

    text: str
    type: str
    start: int
    end: int
    # The probability, under the model, that this span is an entity of this type (exact for a
    # CRF trained in BIOES or BIO; see bistack.taggers.emissions.confidence).
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
            confidences: Sequence[float | None] = s.confidences or [None] * len(s.tokens)
            for t, tag, c in zip(s.tokens, s.tags, confidences, strict=True):
                tokens.append(
                    {"text": t.text, "start": t.start, "end": t.end, "tag": tag, "confidence": c}
                )
        entities = [entity.__dict__ for entity in self.entities]
        record: dict[str, Any] = {"text": self.text, "entities": entities, "tokens": tokens}
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
        except ImportError as error:
            raise ImportError(needs_extra("to_spacy", "spacy", error)) from None
        vocab = getattr(nlp_or_vocab, "vocab", nlp_or_vocab) or Vocab()
        words: list[str] = []
        spaces: list[bool] = []
        tags: list[str] = []
        starts: list[bool | int | None] = []  # as spaCy types sent_starts

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


def in_output_scheme(
    analyses: Sequence[Analysis], labels: Sequence[str], scheme: str
) -> list[SentenceAnalysis]:
    """``analyses`` (tag ids in the model's scheme) with their tags converted to ``scheme``,
    every path of every analysis in one pass (``SchemeTable``); spans and confidences carry
    over, since a conversion keeps every span."""
    paths = [path for a in analyses for path in (a.path, *(p for p, _ in a.alternatives))]
    named = iter(scheme_table(tuple(labels), scheme).tags(paths))
    return [
        SentenceAnalysis(
            next(named),
            analysis.token_confidence,
            analysis.entities,
            [(next(named), p) for _, p in analysis.alternatives],
            plain=scheme == PLAIN,
        )
        for analysis in analyses
    ]


def check_min_confidence(value: float | None) -> None:
    """ValueError unless ``value`` is None or a probability (NaN, 2 or -1 would silently keep
    every entity or none)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"min_confidence must be a probability in [0, 1], got {value!r}")


def tagged_text(
    text: str,
    sentences: Sequence[Sequence[Token]],
    analyses: Iterator[SentenceAnalysis],
    min_confidence: float | None = None,
) -> TaggedText:
    """Assemble a text's tagged sentences, each taking the next analysis, with entity offsets
    into ``text``; entities below ``min_confidence`` are left out, and their tokens tagged
    ``O``, so that every output format (tags, entities, CoNLL) agrees on what was kept."""
    tagged = []
    for tokens in sentences:
        analysis = next(analyses)
        entities, tags = [], list(analysis.tags)
        for s in [] if analysis.plain else spans_from_tags(analysis.tags):
            confidence = analysis.entities.get((s.start, s.end, s.label))
            if min_confidence is not None and (confidence or 0.0) < min_confidence:
                tags[s.start : s.end] = [OUTSIDE] * (s.end - s.start)
                continue
            start, end = tokens[s.start].start, tokens[s.end - 1].end
            entities.append(Entity(text[start:end], s.label, start, end, confidence))
        tagged.append(
            TaggedSentence(
                list(tokens), tags, entities, analysis.confidences, analysis.alternatives
            )
        )
    return TaggedText(text, tagged)


def spaced_tokens(tokens: Sequence[str]) -> list[Token]:
    """``tokens`` with their offsets in the text that joins them by single spaces."""
    tokens_at, start = [], 0
    for token in tokens:
        tokens_at.append(Token(token, start, start + len(token)))
        start += len(token) + 1
    return tokens_at
