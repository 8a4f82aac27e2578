"""Run an exported model directory on onnxruntime, without PyTorch.

Needs only numpy, onnxruntime, NLTK (the tokenizer) and PyYAML besides bistack's own pure-Python
modules; nothing here or in what it imports loads torch (a test runs it with torch made
unimportable). Predictions are the same records ``bistack predict`` writes for the model it was
exported from: ``TaggedText`` for taggers, ``TextPrediction`` for text models.

What it cannot give, because the graph returns the decode rather than scores: a tagger's token
and entity confidences (they are ``null``), ``--min-confidence`` and ``--top-k``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from bistack.analysis import Analysis
from bistack.api.tagging import SentenceAnalysis, Tagging, in_output_scheme
from bistack.api.text_prediction import TextPrediction, with_blank_texts
from bistack.data.buckets import bucket_batches
from bistack.data.features import TokenVocabularies, token_rows
from bistack.data.tables import Example, class_ids, parse_targets, read_table
from bistack.data.tokenize import Token, tokenize_text
from bistack.data.word_rows import flat_word_index, locate_subwords, sentence_rows
from bistack.errors import ConfigError, DataError, ModelFileError
from bistack.metrics.text import (
    ClassificationScores,
    RegressionScores,
    attention_diagnostics,
    classification_scores,
    expected_calibration_error,
    regression_scores,
)

FORMAT = "bistack-onnx"
EXPORT_FILE = "export.json"
MODEL_FILE = "model.onnx"
VOCAB_FILE = "vocab.json"
TOKENIZER_FILE = "tokenizer.json"
DEFAULT_BATCH = 256
# Threads of each onnxruntime session (None: one per core). Corpus prediction's worker
# processes set 1, since several sessions of one thread each outrun one of many.
SESSION_THREADS: int | None = None


def is_exported(path: str | Path) -> bool:
    """Whether ``path`` is a directory ``bistack export`` wrote."""
    return (Path(path) / EXPORT_FILE).is_file()


def open_session(path: str | Path) -> Any:
    """An onnxruntime session on the CPU for ``path``; a clear error when onnxruntime is
    missing."""
    try:
        import onnxruntime
    except ImportError:
        raise ConfigError(
            "running an exported model needs onnxruntime: pip install 'bistack[onnx]'"
        ) from None
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # warnings about unused initialisers are not the user's
    if SESSION_THREADS is not None:
        options.intra_op_num_threads = options.inter_op_num_threads = SESSION_THREADS
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own classes for a damaged file
        raise ModelFileError(f"{path}: not a readable ONNX model ({error})") from None


def namespace(data: Any) -> Any:
    """A config dict as attributes (``config.data.token_column``), as the config classes read."""
    if isinstance(data, dict):
        return SimpleNamespace(**{key: namespace(value) for key, value in data.items()})
    return data


def token_feed(
    sentences: Sequence[Sequence[str]], vocabularies: TokenVocabularies
) -> dict[str, np.ndarray]:
    """Token lists as the graphs' token inputs (``bistack.export.graphs.INPUTS``), int64."""
    rows = token_rows([vocabularies.encode(s) for s in sentences], vocabularies)
    arrays = {
        "words": rows.words,
        "casing": rows.casing,
        "chars": rows.chars,
        "char_lengths": rows.char_lengths,
        "char_index": rows.char_index,
        "lengths": rows.lengths,
    }
    return {name: np.asarray(values, dtype=np.int64) for name, values in arrays.items()}


class ExportedModel:
    """What every exported model holds: its session, vocabularies and settings."""

    PREDICT_FORMATS: ClassVar[tuple[str, ...]] = ("jsonl",)
    PREDICT_OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self, path: Path, meta: dict[str, Any], vocabularies: TokenVocabularies | None
    ) -> None:
        self.path = path
        self.meta = meta
        self.KIND = meta["kind"]
        self.config = namespace(meta["config"])
        self.vocabularies = vocabularies
        self.session = open_session(path / MODEL_FILE)
        self.input_names = [i.name for i in self.session.get_inputs()]

    @property
    def description(self) -> str:
        return f"an exported {self.KIND.replace('_', ' ')}"

    def run(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """The graph's outputs for one batch of token lists."""
        arrays = token_feed(sentences, self.vocabularies)
        feed = {name: arrays[name] for name in self.input_names}
        return self.session.run(None, feed)

    def batches(self, lengths: Sequence[int], batch_size: int | None) -> list[list[int]]:
        """Indices in batches of similar length (as PyTorch predicts), shortest first."""
        size = batch_size or int(getattr(self.config.train, "eval_batch_size", DEFAULT_BATCH))
        return bucket_batches(lengths, size, shuffle=False)


class ExportedTagger(ExportedModel, Tagging):
    """An exported tagger: the best tags (the CRF's Viterbi path), entities with offsets."""

    PREDICT_FORMATS = ("conll", "jsonl", "conllu", "doccano")

    def __init__(
        self, path: Path, meta: dict[str, Any], vocabularies: TokenVocabularies | None
    ) -> None:
        super().__init__(path, meta, vocabularies)
        self.output_scheme = meta["output_scheme"]

    @property
    def labels(self) -> list[str]:
        return list(self.vocabularies.tags.items)

    def _analyse(
        self,
        sentences: Sequence[Sequence[str]],
        batch_size: int | None,
        confidence: bool,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[SentenceAnalysis]:
        if top_k != 1:
            raise ConfigError(f"{self.description} gives the best tags only, not the top {top_k}")
        if any(not s for s in sentences):
            raise ValueError("cannot tag an empty sentence")
        by_index: dict[int, SentenceAnalysis] = {}
        for indices in self.batches([len(s) for s in sentences], batch_size):
            (tags,) = self.run([sentences[i] for i in indices])
            for row, index in enumerate(indices):
                path = tags[row, : len(sentences[index])].tolist()
                by_index[index] = in_output_scheme(
                    Analysis(path, [], {}), self.labels, self.output_scheme
                )
        return [by_index[i] for i in range(len(sentences))]

    def predict(
        self,
        texts: Sequence[str],
        min_confidence: float | None = None,
        batch_size: int | None = None,
        top_k: int = 1,
        progress: bool = False,
    ) -> list[Any]:
        """Tag raw texts as ``Tagger.predict`` does; entity confidences are not in the graph."""
        if min_confidence is not None:
            raise ConfigError(f"{self.description} has no entity confidences to filter on")
        return super().predict(texts, None, batch_size, top_k, progress)


class ExportedTextModel(ExportedModel):
    """An exported classifier or regressor: labels with probabilities, or values."""

    PREDICT_OPTIONS = frozenset({"attention"})

    @property
    def outputs(self) -> dict[str, Any]:
        return self.meta["outputs"]

    @property
    def regresses(self) -> bool:
        return "targets" in self.outputs

    @property
    def labels(self) -> list[str]:
        return list(self.outputs["targets" if self.regresses else "labels"])

    def tokenize(self, text: str) -> list[Token]:
        return tokenize_text(text, self.config.data.tokenizer)

    def run_texts(
        self, texts: Sequence[str], batch_size: int | None = None
    ) -> tuple[list[list[Token]], np.ndarray, list[list[float]] | None]:
        """Tokens, outputs ``(texts, num_outputs)`` and attention weights, in input order."""
        tokens = [self.tokenize(text) for text in texts]
        for index, text_tokens in enumerate(tokens):
            if not text_tokens:
                raise DataError("input", f"text {index + 1} has no tokens: {texts[index]!r}")
        outputs = np.zeros((len(texts), len(self.labels)), dtype=np.float32)
        weights: list[list[float]] = [[] for _ in texts]
        attends = False
        for indices in self.batches([len(t) for t in tokens], batch_size):
            results = self.run([[t.text for t in tokens[i]] for i in indices])
            outputs[indices] = results[0]
            attends = len(results) > 1
            for row, index in enumerate(indices):
                if attends:
                    weights[index] = results[1][row, : len(tokens[index])].tolist()
        return tokens, outputs, weights if attends else None

    def predict(
        self,
        texts: Sequence[str],
        attention: bool = False,
        batch_size: int | None = None,
        progress: bool = False,
    ) -> list[TextPrediction]:
        """One prediction per text, as ``Classifier.predict``/``Regressor.predict`` make it."""
        return with_blank_texts(texts, lambda chosen: self.records(chosen, attention, batch_size))

    def records(
        self, texts: list[str], attention: bool, batch_size: int | None
    ) -> list[TextPrediction]:
        """Label and probabilities, or values, for texts that are not blank."""
        tokens, outputs, weights = self.run_texts(texts, batch_size)
        names = self.labels
        records = []
        for row, text in enumerate(texts):
            values = outputs[row].tolist()
            shown = None
            if attention and weights is not None:
                shown = list(zip(tokens[row], weights[row], strict=True))
            if self.regresses:
                records.append(
                    TextPrediction(
                        text, values=dict(zip(names, values, strict=True)), attention=shown
                    )
                )
            else:
                records.append(
                    TextPrediction(
                        text,
                        label=names[int(np.argmax(outputs[row]))],
                        probabilities=dict(zip(names, values, strict=True)),
                        attention=shown,
                    )
                )
        return records

    def evaluate(self, path: str | Path) -> ClassificationScores | RegressionScores:
        """The metrics ``bistack evaluate`` gives the PyTorch model, on a labelled table."""
        data = self.config.data
        examples = read_table(path, data.text_column, data.label_columns, file_format=data.format)
        return self.score(examples, path)

    def score(
        self, examples: Sequence[Example], path: str | Path = "<data>"
    ) -> ClassificationScores | RegressionScores:
        names = self.labels
        if self.regresses:
            gold_values = parse_targets(examples, names, path)
            _, outputs, weights = self.run_texts([e.text for e in examples])
            diagnostics = attention_diagnostics(weights, 0.0)
            return regression_scores(gold_values, outputs.tolist(), names, diagnostics)
        gold = class_ids(examples, names, path)
        _, outputs, weights = self.run_texts([e.text for e in examples])
        predicted = outputs.argmax(axis=1).tolist()
        scores = classification_scores(gold, predicted, names, attention_diagnostics(weights, 0.0))
        correct = [p == g for p, g in zip(predicted, gold, strict=True)]
        error = expected_calibration_error(outputs.max(axis=1).tolist(), correct)
        return ClassificationScores(scores.to_json() | {"expected_calibration_error": error})


class ExportedLayerTextModel(ExportedTextModel):
    """An exported classifier or regressor over a transformer's layers: the backbone's own
    tokenizer (``tokenizer.json``, run by the ``tokenizers`` library) makes its subword
    windows, as ``TransformerBackbone.tokenize`` does; a model that stacks the texts' own
    features reads them with ``vocab.json`` too."""

    PREDICT_OPTIONS = frozenset()

    def __init__(self, path: Path, meta: dict[str, Any], vocabularies: Any) -> None:
        super().__init__(path, meta, vocabularies)
        from tokenizers import Tokenizer

        settings = meta["tokenizer"]
        self.tokenizer = Tokenizer.from_file(str(path / TOKENIZER_FILE))
        self.sliding = settings["long_texts"] == "sliding_window"
        limit = int(settings["max_length"])
        stride = min(int(settings["stride"]), limit // 2) if self.sliding else 0
        self.tokenizer.enable_truncation(limit, stride=stride, strategy="longest_first")
        self.tokenizer.no_padding()
        self.pad_id = int(settings["pad_id"] or 0)
        self.batch_size = int(settings["batch_size"])

    def run_texts(
        self, texts: Sequence[str], batch_size: int | None = None
    ) -> tuple[list[list[Token]], np.ndarray, list[list[float]] | None]:
        """Outputs ``(texts, num_outputs)`` in input order (no tokens, no attention: the head
        pools over layers)."""
        for index, text in enumerate(texts):
            if not text.strip():
                raise DataError("input", f"text {index + 1} is empty")
        outputs = np.zeros((len(texts), len(self.labels)), dtype=np.float32)
        lengths = [len(text) for text in texts]  # as TransformerBackbone.layer_vectors orders them
        for chosen in bucket_batches(lengths, batch_size or self.batch_size, shuffle=False):
            feed = self.windows([texts[i] for i in chosen])
            # The graph has only the inputs it reads (no chars input without a char encoder).
            outputs[chosen] = self.session.run(None, {n: feed[n] for n in self.input_names})[0]
        return [[] for _ in texts], outputs, None

    def windows(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The graph's inputs: each text's subword window (and, with sliding windows, its
        overflowing windows), right-padded to the longest."""
        rows, owners = [], []
        for index, encoding in enumerate(self.tokenizer.encode_batch(list(texts))):
            parts = [encoding, *(encoding.overflowing if self.sliding else [])]
            rows.extend(part.ids for part in parts)
            owners.extend([index] * len(parts))
        width = max(len(row) for row in rows)
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for row, pieces in enumerate(rows):
            ids[row, : len(pieces)] = pieces
            mask[row, : len(pieces)] = 1
        feed = {
            "input_ids": ids,
            "attention_mask": mask,
            "window_text": np.asarray(owners, dtype=np.int64),
            "text_index": np.arange(len(texts), dtype=np.int64),
        }
        if self.vocabularies is not None:
            feed |= self.token_arrays(texts)
        return feed

    def token_arrays(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """A stacked model's token features of ``texts``, tokenized as in training."""
        tokens = []
        for index, text in enumerate(texts):
            tokens.append([t.text for t in self.tokenize(text)])
            if not tokens[-1]:
                raise DataError("input", f"text {index + 1} has no tokens: {text!r}")
        return token_feed(tokens, self.vocabularies)


class ExportedLayerTagger(ExportedTagger):
    """An exported tagger over a transformer's word states: the backbone's own tokenizer
    (``tokenizer.json``) cuts the words into subword rows as ``tokenize_words`` does, and a
    tagger that stacks the words' own features reads them from ``vocab.json`` as well."""

    def __init__(
        self, path: Path, meta: dict[str, Any], vocabularies: TokenVocabularies | None
    ) -> None:
        super().__init__(path, meta, vocabularies)
        from tokenizers import Tokenizer

        settings = meta["tokenizer"]
        self.tokenizer = Tokenizer.from_file(str(path / TOKENIZER_FILE))
        self.tokenizer.no_padding()
        self.limit = int(settings["max_length"])
        self.budget = self.limit - int(settings["special_tokens"])
        self.unknown = str(settings["unk_token"])
        self.pad_id = int(settings["pad_id"] or 0)
        self.batch_size = int(settings["batch_size"])

    @property
    def labels(self) -> list[str]:
        return list(self.meta["labels"])

    def batches(self, lengths: Sequence[int], batch_size: int | None) -> list[list[int]]:
        """Indices in batches of similar length, as the PyTorch tagger makes them."""
        return bucket_batches(lengths, batch_size or self.batch_size, shuffle=False)

    def run(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        feed = self.word_pieces(sentences)
        if self.vocabularies is not None:
            feed |= token_feed(sentences, self.vocabularies)
        feed["lengths"] = np.asarray([len(s) for s in sentences], dtype=np.int64)
        return self.session.run(None, {name: feed[name] for name in self.input_names})

    def word_pieces(self, sentences: Sequence[Sequence[str]]) -> dict[str, Any]:
        """The graph's subword inputs, as ``bistack.models.backbone.tokenize_words`` makes
        them: words without subwords become the unknown token, and a sentence longer than the
        model's limit is cut between words into rows that each fit."""
        tokenizer = self.tokenizer
        tokenizer.no_truncation()
        words = [w for sentence in sentences for w in sentence]
        counts = [len(e.ids) for e in tokenizer.encode_batch(words, add_special_tokens=False)]
        rows, row_first_word = sentence_rows(sentences, counts, self.budget, self.unknown)
        tokenizer.enable_truncation(self.limit, strategy="longest_first")
        encodings = tokenizer.encode_batch(rows, is_pretokenized=True)
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        subword_word, first, last = locate_subwords(
            [e.word_ids for e in encodings], row_first_word, width, len(words)
        )
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "subword_word": subword_word,
            "first_subword": first,
            "last_subword": last,
            "word_index": flat_word_index([len(s) for s in sentences]),
        }


# The runtime each exported directory names (written by the kind's export plan).
RUNTIMES: dict[str, type[ExportedModel]] = {
    "tagging": ExportedTagger,
    "text": ExportedTextModel,
    "layer_text": ExportedLayerTextModel,
    "layer_tagging": ExportedLayerTagger,
}
# The runtimes that read a model's own token vocabularies always; the others read vocab.json
# only when the model stacks the words' own features beside a transformer's states.
TOKEN_RUNTIMES = frozenset({"tagging", "text"})


def load_exported(path: str | Path) -> ExportedTagger | ExportedTextModel:
    """Load a directory ``bistack export`` wrote (JSON and ONNX only; nothing is unpickled)."""
    path = Path(path)
    try:
        meta = json.loads((path / EXPORT_FILE).read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or meta.get("runtime") not in RUNTIMES:
            raise ModelFileError(f"{path}/{EXPORT_FILE}: not a bistack export")
        vocabularies = None  # a model over a transformer has its tokenizer instead
        if (path / VOCAB_FILE).exists() or meta["runtime"] in TOKEN_RUNTIMES:
            vocab = json.loads((path / VOCAB_FILE).read_text(encoding="utf-8"))
            vocabularies = TokenVocabularies.from_json(vocab)
        return RUNTIMES[meta["runtime"]](path, meta, vocabularies)  # type: ignore[return-value]
    except FileNotFoundError as error:
        raise ModelFileError(f"{path}: missing {Path(error.filename).name}") from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        if isinstance(error, ModelFileError):
            raise
        raise ModelFileError(f"{path}: export.json or vocab.json is damaged ({error})") from None
