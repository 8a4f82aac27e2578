"""Exported taggers on onnxruntime, without PyTorch: ``bistack predict``/``serve`` of a
directory ``bistack export`` wrote. The graph returns the emissions and the shared output math
(``bistack.taggers.emissions.decoding``) does the rest, so an exported tagger gives what the
PyTorch one
gives: tags, token and entity confidences, the k best analyses, ``min_confidence``.

A directory of format 1 (written before that) returns its best tags only: it predicts as it
always did, with no confidences, and an option that needs them says to export again.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from bistack.config import ExperimentConfig
from bistack.data.subwords import SubwordSettings, word_pieces
from bistack.data.word_rows import Context, flat_word_index
from bistack.errors import ConfigError, ModelFileError
from bistack.files.onnx_session import TOKEN_INPUTS, WORD_INPUTS, ExportedFiles, token_feed
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


class ExportedLayerTagger(ExportedTagging):
    """An exported tagger over a transformer's word states: the backbone's own tokenizer
    (``tokenizer.json``) cuts the words into subword rows as the PyTorch backbone does
    (``bistack.data.subwords``), and a tagger that stacks the words' own features reads them
    from ``vocab.json`` as well."""

    CONFIG = LayerPoolingTaggerConfig
    INPUTS = (*WORD_INPUTS, *TOKEN_INPUTS)

    def __init__(self, files: ExportedFiles) -> None:
        self.tokenizer = files.tokenizer()
        tokenizer = files.setting("tokenizer")
        self.settings = SubwordSettings(
            limit=int(tokenizer["max_length"]),
            special_tokens=int(tokenizer["special_tokens"]),
            unknown=str(tokenizer["unk_token"]),
            pad_id=int(tokenizer["pad_id"] or 0),
            context=int(tokenizer.get("context", 0)),  # absent: exported before it existed
        )
        self.pieces_per_batch = int(tokenizer["batch_size"])
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

    def feed(
        self, sentences: Sequence[Sequence[str]], contexts: Sequence[Context] | None = None
    ) -> dict[str, np.ndarray]:
        pieces = word_pieces(self.tokenizer, sentences, self.settings, contexts)
        feed = {
            "input_ids": pieces.input_ids,
            "attention_mask": pieces.attention_mask,
            "subword_word": pieces.subword_word,
            "first_subword": pieces.first_subword,
            "last_subword": pieces.last_subword,
            "word_index": flat_word_index(pieces.lengths),
        }
        if self.files.vocabularies is not None:
            feed |= token_feed(sentences, self.files.vocabularies)
        feed["lengths"] = np.asarray(pieces.lengths, dtype=np.int64)
        return feed
