"""What every exported directory shares, without PyTorch: its files, an onnxruntime session on
the CPU, and the token inputs the graphs read.

An exported directory holds ``export.json`` (the kind, the training config and what the kind's
runtime needs), ``model.onnx``, and ``vocab.json`` / ``tokenizer.json`` as the kind needs them.
Each kind's runtime is in its family (``bistack.taggers.exported.runtime``,
``bistack.text_models.runtime``); ``bistack.predictor.open_model`` opens an exported directory as it
opens a model directory. Needs only numpy, onnxruntime, NLTK (the tokenizer) and PyYAML besides
bistack's own pure-Python modules; nothing here or in the runtimes loads torch (a test runs them
with torch made unimportable).

Format versions: 1 (bistack before each kind family had one home) graphs return what users get
(a tagger's best tags only; a text model's probabilities or values); 2 graphs also return what
the shared output math reads (a tagger's emissions; a text model's raw scores), so an exported
model gives every prediction option the PyTorch model gives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bistack.config.files import recorded_config
from bistack.data.buckets import bucket_batches
from bistack.data.features import TokenVocabularies, token_rows
from bistack.errors import ConfigError, ModelFileError, needs_extra

FORMAT = "bistack-onnx"
FORMAT_VERSION = 3  # 3: an ensemble's members may share a backbone's graph (``stages/``)
STAGES, STAGE_FILE = "stages", "stage.json"
EXPORT_FILE = "export.json"
MODEL_FILE = "model.onnx"
VOCAB_FILE = "vocab.json"
TOKENIZER_FILE = "tokenizer.json"
# The graphs' inputs (``bistack.models.graphs`` and each family's graphs build them): a model's own
# token features, a tagger's subword rows over a transformer, a text model's subword windows.
TOKEN_INPUTS = ("words", "casing", "chars", "char_lengths", "char_index", "lengths")
WORD_INPUTS = (
    "input_ids",
    "attention_mask",
    "subword_word",
    "first_subword",
    "last_subword",
    "word_index",
)
WINDOW_INPUTS = ("input_ids", "attention_mask", "window_text", "text_index")


def is_exported(path: str | Path) -> bool:
    """Whether ``path`` is a directory ``bistack export`` wrote."""
    return (Path(path) / EXPORT_FILE).is_file()


def read_export(path: str | Path) -> dict[str, Any]:
    """export.json of an exported directory, checked to be one."""
    path = Path(path)
    try:
        meta = json.loads((path / EXPORT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(f"{path}: missing {EXPORT_FILE}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ModelFileError(f"{path}/{EXPORT_FILE}: not valid JSON ({error})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFileError(f"{path}/{EXPORT_FILE}: not a bistack export")
    if not isinstance(meta.get("kind"), str) or not isinstance(meta.get("config"), dict):
        raise ModelFileError(f"{path}/{EXPORT_FILE}: damaged: it names no model kind or config")
    return meta


def open_session(path: str | Path, threads: int | None = None) -> Any:
    """An onnxruntime session on the CPU for ``path`` with ``threads`` threads (None: one per
    core); a clear error when onnxruntime is missing."""
    try:
        import onnxruntime
    except ImportError as error:
        raise ConfigError(needs_extra("running an exported model", "onnx", error)) from None
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # warnings about unused initialisers are not the user's
    # No allocation plan kept a shape: batches come in many widths, and the plans for each held
    # an exported ensemble's peak at 1.5x the PyTorch one's (1.3x without; the same speed).
    options.enable_mem_pattern = False
    if threads is not None:
        options.intra_op_num_threads = options.inter_op_num_threads = threads
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own classes for a damaged file
        raise ModelFileError(f"{path}: not a readable ONNX model ({error})") from None


def checked_stage(folder: Path, session: Any, serves: Sequence[str]) -> None:
    """A shared backbone's ``stage.json`` held to its graph, once, at open: every output it
    says it serves (``serves``) is one of the graph's; an error naming those that are not."""
    given = {output.name for output in session.get_outputs()}
    missing = [name for name in serves if name not in given]
    if missing:
        raise ModelFileError(
            f"{folder / STAGE_FILE} says its graph serves {', '.join(map(repr, missing))}, and "
            f"the graph gives {', '.join(map(repr, sorted(given)))}: was it edited? Export the "
            "ensemble again"
        )


def stage_shape(meta: dict[str, Any], where: Path) -> list[int] | None:
    """The (layers, hidden) ``shape`` an ``export.json`` or ``stage.json`` records of a shared
    backbone's vectors (None where an earlier version recorded none)."""
    shape = meta.get("shape")
    if shape is None:
        return None
    if not isinstance(shape, list) or not all(isinstance(n, int) for n in shape):
        raise ModelFileError(
            f"{where}: shape {shape!r} is not a backbone's (layers, hidden); was it edited? "
            "Export the ensemble again"
        )
    return shape


def check_member_reads(
    member: Path,
    stage: Path,
    reads: str,
    serves: Sequence[str],
    shape: list[int] | None,
    served: list[int] | None,
) -> None:
    """A member of an exported ensemble held to the shared backbone it names, once, at open:
    the output it ``reads`` is one the stage ``serves``, of the (layers, hidden) ``shape`` the
    stage gives (``served``; unchecked where an earlier version recorded none); an error
    naming the mismatch, not a failure inside a later run."""
    mismatch = None
    if reads not in serves:
        listed = ", ".join(map(repr, serves))
        mismatch = (
            f"reads the {reads!r} vectors, which the stage does not serve (it serves {listed})"
        )
    elif shape is not None and served is not None and shape != served:
        mismatch = f"reads vectors of (layers, hidden) {shape}, where the stage gives {served}"
    if mismatch is not None:
        raise ModelFileError(
            f"{member}: {mismatch}: {stage} is not this ensemble's shared backbone (copied from "
            "another export, or edited?); export the ensemble again"
        )


def token_feed(
    sentences: Sequence[Sequence[str]], vocabularies: TokenVocabularies
) -> dict[str, np.ndarray]:
    """Token lists as the graphs' token inputs (``bistack.models.graphs.INPUTS``), int64."""
    rows = token_rows(sentences, vocabularies)
    arrays = {
        "words": rows.words,
        "casing": rows.casing,
        "chars": rows.chars,
        "char_lengths": rows.char_lengths,
        "char_index": rows.char_index,
        "lengths": rows.lengths,
    }
    return {name: np.asarray(values, dtype=np.int64) for name, values in arrays.items()}


class ExportedFiles:
    """An exported directory opened: its settings (``meta``), its training config (built into
    ``config_class``, as the PyTorch model's is), its token vocabularies (when it has
    ``vocab.json``) and its session."""

    def __init__(
        self,
        path: str | Path,
        config_class: Any,
        threads: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.threads = threads
        self.meta = read_export(self.path) if meta is None else meta  # as already read, if so
        self.version = int(self.meta.get("format_version", 1))
        try:
            self.config = recorded_config(
                config_class, self.meta["config"], f"{path}/{EXPORT_FILE}"
            )
        except ConfigError as error:
            raise ModelFileError(str(error)) from None
        self.vocabularies: TokenVocabularies | None = None
        if (self.path / VOCAB_FILE).is_file():
            try:
                vocab = json.loads((self.path / VOCAB_FILE).read_text(encoding="utf-8"))
                self.vocabularies = TokenVocabularies.from_json(vocab)
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
                raise ModelFileError(f"{self.path}/{VOCAB_FILE}: damaged") from None
        if not (self.path / MODEL_FILE).is_file():
            raise ModelFileError(f"{self.path}: missing {MODEL_FILE}")
        self.session = open_session(self.path / MODEL_FILE, threads)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.sizes: dict[str, int] = {}  # each output's last dimension, as export.json says

    def expect(
        self, inputs: Sequence[str], outputs: dict[str, int | None], required: Sequence[str]
    ) -> None:
        """Check the graph is one this kind's runtime reads: inputs among ``inputs`` (a graph
        leaves out what it does not read) with the ``required`` ones there, and exactly the
        ``outputs``, each with its last dimension where one is given (the labels' count): a
        ModelFileError naming the file otherwise, before any input is read."""
        where = f"{self.path}/{MODEL_FILE}"
        unknown = sorted(set(self.input_names) - set(inputs))
        missing = sorted(set(required) - set(self.input_names))
        if unknown or missing:
            problem = (
                f"inputs it should not have ({', '.join(unknown)})"
                if unknown
                else (f"no input {', '.join(missing)}")
            )
            raise ModelFileError(
                f"{where}: not the graph of this {self.meta['kind']} export: {problem}"
            )
        if sorted(self.output_names) != sorted(outputs):
            raise ModelFileError(
                f"{where}: not the graph of this {self.meta['kind']} export: it returns "
                f"{', '.join(self.output_names)}, expected {', '.join(outputs)}"
            )
        self.expect_columns({name: size for name, size in outputs.items() if size is not None})

    def expect_columns(self, sizes: dict[str, int]) -> None:
        """Each named output's last dimension (the labels' count, as export.json says): checked
        now where the graph fixes it, else on the graph's first answer (``run``)."""
        self.sizes = dict(sizes)
        shapes = {o.name: o.shape for o in self.session.get_outputs()}
        for name, size in sizes.items():
            last = shapes[name][-1] if shapes.get(name) else None
            if isinstance(last, int) and last != size:
                raise ModelFileError(
                    f"{self.path}/{MODEL_FILE}: its {name} has {last} columns, but "
                    f"{EXPORT_FILE} names {size} labels: the files are of two different exports"
                )

    def setting(self, key: str) -> Any:
        """A value the kind's export plan wrote into export.json; a missing one is damage."""
        if key not in self.meta:
            raise ModelFileError(f"{self.path}/{EXPORT_FILE}: missing {key!r}")
        return self.meta[key]

    def run(self, feed: dict[str, np.ndarray], outputs: Sequence[str] | None = None) -> list[Any]:
        """The graph's ``outputs`` (default all) for ``feed``; only the inputs the graph has are
        fed (a graph without a char encoder has no ``chars`` input)."""
        inputs = {name: feed[name] for name in self.input_names}
        names = list(outputs) if outputs else self.output_names
        results = self.session.run(names, inputs)
        for name, result in zip(names, results, strict=True):
            # A graph whose last dimension is symbolic is checked on its first answer.
            size = self.sizes.get(name)
            if size is not None and result.ndim and result.shape[-1] != size:
                raise ModelFileError(
                    f"{self.path}/{MODEL_FILE}: its {name} has {result.shape[-1]} columns, but "
                    f"{EXPORT_FILE} names {size} labels: the files are of two different exports"
                )
        return results

    def token_vocabularies(self) -> TokenVocabularies:
        if self.vocabularies is None:
            raise ModelFileError(f"{self.path}: missing {VOCAB_FILE}")
        return self.vocabularies

    def batches(self, lengths: Sequence[int], batch_size: int) -> list[list[int]]:
        """Indices in batches of similar length (as PyTorch predicts), shortest first."""
        return bucket_batches(lengths, batch_size, shuffle=False)

    def tokenizer(self) -> Any:
        """The backbone's own tokenizer (``tokenizer.json``), for the ``tokenizers`` library."""
        return tokenizer_in(self.path)


def tokenizer_in(folder: Path) -> Any:
    """``folder``'s backbone tokenizer (``tokenizer.json``), for the ``tokenizers`` library."""
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    except Exception as error:  # the tokenizers library raises its own Exception
        raise ModelFileError(f"{folder}/{TOKENIZER_FILE}: not readable ({error})") from None
