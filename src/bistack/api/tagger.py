"""The tagger a user loads: ``Tagger.load(path).predict(["Washington signed ..."])``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from bistack.config import TaggerConfig, config_from_dict
from bistack.data.batching import bucket_batches, collate_tagging
from bistack.data.conll import Sentence, read_conll
from bistack.data.features import TokenVocabularies
from bistack.data.tokenize import Token, tokenize
from bistack.errors import DataError
from bistack.metrics.entities import EntityScores, score_entities
from bistack.modeldir import load_metadata, load_weights, save_metadata, save_weights
from bistack.models.tagger import SequenceTagger, build_tagger
from bistack.schemes import convert_tags, spans_from_tags

KIND = "tagger"


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


class Tagger:
    """A trained sequence tagger with its vocabularies; tags in the scheme of its training data."""

    def __init__(
        self,
        model: SequenceTagger,
        vocabularies: TokenVocabularies,
        config: TaggerConfig,
        output_scheme: str,
    ) -> None:
        self.model = model.eval()
        self.vocabularies = vocabularies
        self.config = config
        self.output_scheme = output_scheme

    @classmethod
    def load(cls, path: str | Path) -> Tagger:
        """Load a model directory written by ``bistack train`` (no unpickling)."""
        meta, vocab = load_metadata(path, KIND)
        if "backbone" in meta["config"]:
            from bistack.api.layer_tagger import load_layer_tagger

            return load_layer_tagger(path, meta, vocab)
        config = config_from_dict(meta["config"], source=f"{path}/config.json")
        vocabularies = TokenVocabularies.from_json(vocab)
        model = build_tagger(config, vocabularies)
        load_weights(path, model)
        return cls(model, vocabularies, config, meta["output_scheme"])

    @property
    def labels(self) -> list[str]:
        """The tags the model predicts, in the scheme it was trained in."""
        return list(self.vocabularies.tags.items)

    def save(self, path: str | Path) -> None:
        self.save_metadata(path)
        self.save_weights(path)

    def save_weights(self, path: str | Path) -> None:
        save_weights(path, self.model)

    def save_metadata(self, path: str | Path) -> None:
        save_metadata(
            path,
            KIND,
            self.config.to_dict(),
            self.vocabularies.to_json(),
            output_scheme=self.output_scheme,
        )

    @torch.inference_mode()
    def tag_tokens(
        self, sentences: Sequence[Sequence[str]], batch_size: int | None = None
    ) -> list[list[str]]:
        """Tags for pre-tokenised sentences, in the output scheme, in input order."""
        batch_size = batch_size or self.config.train.eval_batch_size
        encoded = [self.vocabularies.encode(tokens) for tokens in sentences]
        results: list[list[str]] = [[] for _ in sentences]
        was_training = self.model.training
        self.model.eval()
        labels = self.vocabularies.tags.items
        for indices in bucket_batches([len(s) for s in sentences], batch_size, shuffle=False):
            if any(not sentences[i] for i in indices):
                raise ValueError("cannot tag an empty sentence")
            batch = collate_tagging([encoded[i] for i in indices], self.vocabularies)
            predicted = self.model.decode(batch).tolist()
            for row, index in enumerate(indices):
                tags = [labels[t] for t in predicted[row][: len(sentences[index])]]
                results[index] = convert_tags(tags, self.output_scheme)
        self.model.train(was_training)
        return results

    def predict(self, texts: Sequence[str]) -> list[list[TaggedSentence]]:
        """Tokenise raw ``texts`` and tag them: for each text, its sentences with entities."""
        tokenized = [tokenize(text) for text in texts]
        flat = [[token.text for token in sentence] for doc in tokenized for sentence in doc]
        tags = iter(self.tag_tokens(flat))
        output = []
        for text, doc in zip(texts, tokenized, strict=True):
            sentences = []
            for tokens in doc:
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
                sentences.append(TaggedSentence(tokens, sentence_tags, entities))
            output.append(sentences)
        return output

    def evaluate(self, path: str | Path) -> EntityScores:
        """Score the tagger on a labelled CoNLL file, as conlleval does."""
        sentences = read_conll(path, self.config.data.token_column, self.config.data.tag_column)
        return self.score(sentences, path)

    def score(self, sentences: Sequence[Sentence], path: str | Path = "<data>") -> EntityScores:
        """Score against gold tags, both written in the output scheme."""
        check_known_types(sentences, self.labels, path)
        predicted = self.tag_tokens([s.tokens for s in sentences])
        gold = [convert_tags(s.tags, self.output_scheme) for s in sentences]
        return score_entities(gold, predicted)


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
