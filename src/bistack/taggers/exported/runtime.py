"""Exported taggers on onnxruntime, without PyTorch: ``bistack predict``/``serve`` of a
directory ``bistack export`` wrote. The graph returns the emissions and the shared output math
(``bistack.taggers.emissions.decoding``) does the rest, so an exported tagger gives what the
PyTorch one
gives: tags, token and entity confidences, the k best analyses, ``min_confidence``.

A directory of format 1 (written before that) returns its best tags only: it predicts as it
always did, with no confidences, and an option that needs them says to export again.

A member of an exported ensemble over a shared frozen backbone (format 3: its ``export.json``
names its ``stage``) holds its tagger alone; the backbone's graph is the ensemble's
(:class:`WordStatesStage`), run once a batch for every member that reads it.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np

from bistack.config import ExperimentConfig
from bistack.data.subwords import SubwordSettings, word_pieces
from bistack.data.word_rows import Context, flat_word_index
from bistack.errors import ConfigError, ModelFileError
from bistack.files.onnx_session import (
    EXPORT_FILE,
    MODEL_FILE,
    STAGE_FILE,
    TOKEN_INPUTS,
    WORD_INPUTS,
    ExportedFiles,
    check_member_reads,
    checked_stage,
    open_session,
    stage_shape,
    token_feed,
    tokenizer_in,
)
from bistack.schemes import OUTPUT_SCHEMES
from bistack.taggers.config import LayerPoolingTaggerConfig, TaggerConfig
from bistack.taggers.emissions.decoding import Analysis, TagDecoder
from bistack.taggers.models.records import SentenceAnalysis, TaggedText, in_output_scheme
from bistack.taggers.models.tagging import Emitter, Tagging, context_emitter


class ExportedTagging(Tagging):
    """What both exported taggers share; a subclass says how sentences become the graph's
    inputs (``feed``)."""

    def __init__(self, files: ExportedFiles) -> None:
        self.files = files
        self.config = files.config
        self.output_scheme = str(files.setting("output_scheme"))
        if self.output_scheme not in OUTPUT_SCHEMES:
            raise ModelFileError(
                f"{files.path}/export.json: output_scheme {self.output_scheme!r} is not a "
                f"scheme ({', '.join(OUTPUT_SCHEMES)})"
            )
        if files.version >= 2:
            self._decoder = TagDecoder.from_json(files.setting("decoder"))
            outputs = {"tags": None, "emissions": len(self._decoder.labels)}
        else:  # format 1 kept no decoder: its labels, for naming the graph's tags
            self._decoder = TagDecoder(self.format_1_labels(), self.output_scheme)
            outputs = {"tags": None}
        files.expect(self.INPUTS, outputs, ("lengths",))
        # kept in its decoder
        self.calibration = {
            "temperature": self._decoder.temperature,
            "consistency": self._decoder.consistency,
        }

    CONFIG: ClassVar[type[ExperimentConfig]]
    INPUTS: ClassVar[tuple[str, ...]]  # what its graph may read

    @classmethod
    def load(cls, path: str | Path, threads: int | None = None) -> ExportedTagging:
        return cls(ExportedFiles(path, cls.CONFIG, threads))

    def format_1_labels(self) -> list[str]:
        return list(self.files.token_vocabularies().tags.items)

    @abstractmethod
    def feed(self, sentences: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
        """The graph's inputs for a batch of sentences."""

    @property
    def decoder(self) -> TagDecoder:
        return self._decoder

    @property
    def batch_size(self) -> int:
        return self.config.train.eval_batch_size

    def emissions(self, indices: Sequence[int], sentences: Sequence[Sequence[str]]) -> np.ndarray:
        (emissions,) = self.files.run(self.feed(sentences), ["emissions"])
        return emissions

    def _analyse(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None,
        confidence: bool,
        top_k: int = 1,
        progress: bool = False,
        emitter: Any = None,
        documents: Sequence[Any] | None = None,
    ) -> list[SentenceAnalysis]:
        if self.files.version >= 2:
            return super()._analyse(
                sentences, batch_size, confidence, top_k, progress, emitter, documents
            )
        self.offers(top_k=top_k)
        if any(not s for s in sentences):
            raise ValueError("cannot tag an empty sentence")
        by_index: dict[int, Analysis] = {}
        lengths = [len(s) for s in sentences]
        for indices in self.files.batches(
            lengths, self.batch_size if batch_size is None else batch_size
        ):
            (tags,) = self.files.run(self.feed([sentences[i] for i in indices]), ["tags"])
            for row, index in enumerate(indices):
                by_index[index] = Analysis(tags[row, : lengths[index]].tolist(), [], {})
        ordered = [by_index[i] for i in range(len(sentences))]
        return in_output_scheme(ordered, self.labels, self.output_scheme)

    def offers(self, min_confidence: float | None = None, top_k: int = 1) -> None:
        """Refuse what a format 1 directory cannot give (its graph returns the tags alone)."""
        if self.files.version >= 2 or (min_confidence is None and top_k == 1):
            return
        raise ConfigError(
            f"{self.files.path} was exported by an earlier bistack, whose graph gives the best "
            "tags only: export the model again for confidences, --top-k and --min-confidence"
        )

    def predict(
        self,
        texts: Sequence[str],
        min_confidence: float | None = None,
        batch_size: int | None = None,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[TaggedText]:
        self.offers(min_confidence, top_k)
        return super().predict(texts, min_confidence, batch_size, top_k, progress)

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
        self.offers(min_confidence, top_k)
        return super().predict_tokens(
            sentences, min_confidence, batch_size, top_k, progress, documents, emitter
        )


class ExportedTagger(ExportedTagging):
    """An exported recurrent tagger: its graph reads the words' own features (``vocab.json``)."""

    CONFIG = TaggerConfig
    INPUTS = TOKEN_INPUTS

    def feed(self, sentences: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
        return token_feed(sentences, self.files.token_vocabularies())


def subword_settings(tokenizer: dict[str, Any]) -> SubwordSettings:
    """How sentences become subword rows, as export.json's or stage.json's ``tokenizer``
    says."""
    return SubwordSettings(
        limit=int(tokenizer["max_length"]),
        special_tokens=int(tokenizer["special_tokens"]),
        unknown=str(tokenizer["unk_token"]),
        pad_id=int(tokenizer["pad_id"] or 0),
        context=int(tokenizer.get("context", 0)),  # absent: exported before it existed
    )


def subword_feed(pieces: Any) -> dict[str, np.ndarray]:
    """A batch's subword rows (``word_pieces``) as the backbone graph's inputs."""
    return {
        "input_ids": pieces.input_ids,
        "attention_mask": pieces.attention_mask,
        "subword_word": pieces.subword_word,
        "first_subword": pieces.first_subword,
        "last_subword": pieces.last_subword,
    }


class WordStatesStage:
    """The frozen backbone an exported tagger ensemble's members share (``stages/NAME``): a
    batch's flat word states ``(words, layers, hidden)``, one pass of its graph a batch for
    all of them."""

    SERVES = ("word_states",)

    def __init__(self, folder: Path, threads: int | None) -> None:
        self.path = folder.resolve()
        try:
            meta = json.loads((folder / STAGE_FILE).read_text(encoding="utf-8"))
            tokenizer = meta["tokenizer"]
            self.settings = subword_settings(tokenizer)
            self.pieces_per_batch = int(tokenizer["batch_size"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ModelFileError(
                f"{folder}: not the shared backbone of an exported ensemble ({error}); export "
                "the ensemble again"
            ) from None
        self.shape = stage_shape(meta, folder / STAGE_FILE)
        self.tokenizer = tokenizer_in(folder)
        self.session = open_session(folder / MODEL_FILE, threads)
        checked_stage(folder, self.session, self.SERVES)
        self.inputs = [i.name for i in self.session.get_inputs()]  # what the graph reads
        self.passes = 0

    def word_states(
        self, sentences: Sequence[Sequence[str]], contexts: Sequence[Context] | None = None
    ) -> tuple[np.ndarray, list[int]]:
        """The sentences' flat word states, and their lengths."""
        pieces = word_pieces(self.tokenizer, sentences, self.settings, contexts)
        feed = subword_feed(pieces)
        (states,) = self.session.run(["word_states"], {k: feed[k] for k in self.inputs})
        self.passes += 1
        return states, list(pieces.lengths)


class ExportedLayerTagger(ExportedTagging):
    """An exported tagger over a transformer's word states: the backbone's own tokenizer
    (``tokenizer.json``) cuts the words into subword rows as the PyTorch backbone does
    (``bistack.data.subwords``), and a tagger that stacks the words' own features reads them
    from ``vocab.json`` as well. A member of an exported ensemble over a shared backbone holds
    its tagger alone and reads the word states from its ``stage`` (handed over by the member
    that opened it first, else opened here)."""

    CONFIG = LayerPoolingTaggerConfig
    INPUTS = (*WORD_INPUTS, *TOKEN_INPUTS, "word_states")

    def __init__(self, files: ExportedFiles, stage: WordStatesStage | None = None) -> None:
        self.stage: WordStatesStage | None = None
        named = files.meta.get("stage")
        if named is None:  # the backbone in its own graph
            self.tokenizer = files.tokenizer()
            self.settings = subword_settings(files.setting("tokenizer"))
            self.pieces_per_batch = int(files.setting("tokenizer")["batch_size"])
        else:
            folder = (files.path / str(named)).resolve()
            self.stage = stage if stage is not None and stage.path == folder else None
            self.stage = self.stage or WordStatesStage(folder, files.threads)
            shape = stage_shape(files.meta, files.path / EXPORT_FILE)
            served = self.stage.SERVES
            check_member_reads(files.path, folder, served[0], served, shape, self.stage.shape)
            self.settings = self.stage.settings
            self.pieces_per_batch = self.stage.pieces_per_batch
        super().__init__(files)

    def format_1_labels(self) -> list[str]:
        return list(self.files.setting("labels"))

    @property
    def batch_size(self) -> int:
        return self.pieces_per_batch

    def emitter_of(
        self, sentences: Sequence[Sequence[str]], documents: Sequence[Any] | None
    ) -> Emitter:
        if not self.settings.context:
            return self.emissions

        def emit(chosen: Sequence[Sequence[str]], contexts: Sequence[Context]) -> np.ndarray:
            (emissions,) = self.files.run(self.feed(chosen, contexts), ["emissions"])
            return emissions

        return context_emitter(emit, sentences, documents, self.settings.context)

    def shared_parts(self) -> dict[str, Any]:
        """Its shared backbone, for the other members of its ensemble."""
        return {} if self.stage is None else {"stage": self.stage}

    def shared_stage_key(self) -> Hashable | None:
        """Members reading one shared backbone's graph share its pass."""
        return None if self.stage is None else ("exported word states", str(self.stage.path))

    def shared_emitter(
        self,
        taggers: Sequence[Tagging],
        sentences: Sequence[Sequence[str]],
        documents: Sequence[Any] | None,
    ) -> Emitter:
        """The emissions of ``taggers`` (members over this one's shared backbone) side by
        side along the tag axis, the backbone's word states computed once a batch."""
        members = cast("list[ExportedLayerTagger]", list(taggers))

        def emit(chosen: Sequence[Sequence[str]], contexts: Sequence[Context] | None) -> np.ndarray:
            assert self.stage is not None, "a member with a shared backbone"
            states, lengths = self.stage.word_states(chosen, contexts)
            parts = [m.head_emissions(states, lengths, chosen) for m in members]
            return np.concatenate(parts, axis=-1)

        if not self.settings.context:
            return lambda indices, chosen: emit(chosen, None)
        return context_emitter(emit, sentences, documents, self.settings.context)

    def head_emissions(
        self, states: np.ndarray, lengths: Sequence[int], sentences: Sequence[Sequence[str]]
    ) -> np.ndarray:
        """Its emissions ``(batch, seq, tags)`` from the shared backbone's word states."""
        (emissions,) = self.files.run(self.head_feed(states, lengths, sentences), ["emissions"])
        return emissions

    def head_feed(
        self, states: np.ndarray, lengths: Sequence[int], sentences: Sequence[Sequence[str]]
    ) -> dict[str, np.ndarray]:
        """Its head's inputs: the batch's flat word states, then its words'."""
        return {"word_states": states} | self.word_feed(lengths, sentences)

    def word_feed(
        self, lengths: Sequence[int], sentences: Sequence[Sequence[str]]
    ) -> dict[str, np.ndarray]:
        """Where each sentence's words lie in the batch, their own features, their lengths."""
        feed = {"word_index": flat_word_index(lengths)}
        if self.files.vocabularies is not None:
            feed |= token_feed(sentences, self.files.vocabularies)
        feed["lengths"] = np.asarray(lengths, dtype=np.int64)
        return feed

    def feed(
        self, sentences: Sequence[Sequence[str]], contexts: Sequence[Context] | None = None
    ) -> dict[str, np.ndarray]:
        if self.stage is not None:  # the word states from the shared backbone, then the head's
            return self.head_feed(*self.stage.word_states(sentences, contexts), sentences)
        pieces = word_pieces(self.tokenizer, sentences, self.settings, contexts)
        return subword_feed(pieces) | self.word_feed(pieces.lengths, sentences)
