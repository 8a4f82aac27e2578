"""What every tagger shares: its predictions (``TaggedText``: sentences, tags, entities with
character offsets) and how it is scored against gold tags, as conlleval scores them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from bistack.data.conll import Sentence, write_conll
from bistack.data.tokenize import Token, tokenize
from bistack.errors import DataError
from bistack.metrics.entities import EntityScores, score_entities
from bistack.schemes import convert_tags, spans_from_tags


@dataclass(frozen=True)
class Entity:
    """An entity found in raw text: ``text[start:end]`` is ``text``."""

    text: str
    type: str
    start: int
    end: int


@dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a raw text: its tokens (with offsets), tags and entities."""

    tokens: list[Token]
    tags: list[str]
    entities: list[Entity]


@dataclass(frozen=True)
class TaggedText(Sequence[TaggedSentence]):
    """A raw text and its tagged sentences; iterating it gives the sentences."""

    text: str
    sentences: list[TaggedSentence]

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
        return {
            "text": self.text,
            "entities": [entity.__dict__ for entity in self.entities],
            "tokens": [
                {"text": t.text, "start": t.start, "end": t.end, "tag": tag}
                for s in self.sentences
                for t, tag in zip(s.tokens, s.tags, strict=True)
            ],
        }

    def to_conll(self) -> str:
        """``token<TAB>tag`` lines, a blank line after each sentence."""
        return write_conll(
            [Sentence([t.text for t in s.tokens]) for s in self.sentences],
            [s.tags for s in self.sentences],
        )


def tagged_text(
    text: str, sentences: Sequence[Sequence[Token]], tags: Iterator[list[str]]
) -> TaggedText:
    """Assemble a text's tagged sentences, each taking the next tag list from ``tags``, with
    entity offsets into ``text``."""
    tagged = []
    for tokens in sentences:
        sentence_tags = next(tags)
        entities = [
            Entity(
                text[tokens[s.start].start : tokens[s.end - 1].end],
                s.label,
                tokens[s.start].start,
                tokens[s.end - 1].end,
            )
            for s in spans_from_tags(sentence_tags)
        ]
        tagged.append(TaggedSentence(list(tokens), sentence_tags, entities))
    return TaggedText(text, tagged)


TagTokens = Callable[[Sequence[Sequence[str]]], list[list[str]]]


def predict_texts(tag_tokens: TagTokens, texts: Sequence[str]) -> list[TaggedText]:
    """Tokenise raw ``texts`` and tag every sentence in one batched call of ``tag_tokens``."""
    tokenized = [tokenize(text) for text in texts]
    flat = [[token.text for token in sentence] for doc in tokenized for sentence in doc]
    tags = iter(tag_tokens(flat))
    return [tagged_text(text, doc, tags) for text, doc in zip(texts, tokenized, strict=True)]


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
    check_known_types(sentences, labels, path)
    predicted = tag_tokens([s.tokens for s in sentences])
    gold = [convert_tags(s.tags, output_scheme) for s in sentences]
    return score_entities(gold, predicted)
