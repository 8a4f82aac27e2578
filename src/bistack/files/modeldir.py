"""A model is a directory: ``config.json``, ``vocab.json`` and ``model.safetensors``.

Nothing is pickled, so loading a model from someone else runs none of their code. Every file is
written to a temporary name and renamed into place, so an interrupted save never leaves a
half-written file behind.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bistack._version import __version__
from bistack.config.files import kind_named
from bistack.errors import BistackError, ConfigError, ModelFileError
from bistack.files.claim import Layout, staged
from bistack.files.leftovers import leftover_of, leftover_prefix

if TYPE_CHECKING:  # what reads config.json (the task table) runs without torch
    from torch import nn

CONFIG = "config.json"
VOCAB = "vocab.json"
WEIGHTS = "model.safetensors"
# Everything a model directory holds: its files, its card and a fine-tuned backbone's folder.
MODEL_ENTRIES = frozenset({CONFIG, VOCAB, WEIGHTS, "README.md", "backbone"})


# What a fine-tuned backbone's folder holds: the files HuggingFace's ``save_pretrained`` writes
# for a model and its tokenizer (weights whole or in shards).
BACKBONE_FILES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "chat_template.jinja",
        "vocab.txt",
        "vocab.json",
        "merges.txt",
        "spiece.model",
        "sentencepiece.bpe.model",
        "spm.model",
        "tokenizer.model",
    }
)
SHARD = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")


def is_model_entry(name: str) -> bool:
    """Whether bistack writes ``name`` in a model folder: one of its entries, or what a save
    of one killed midway left (``atomic_write``'s temporary ``.NAME.bistack-tmp-XXXXXXXX``, a
    backbone's staging folder ``.backbone.bistack-staging-…``)."""
    return name in MODEL_ENTRIES or leftover_of(name) in MODEL_ENTRIES


def model_layout(name: str) -> Layout | bool:
    """A model folder's layout (see ``bistack.files.claim``): its files, and the fine-tuned
    backbone's folder, whose files are HuggingFace's."""
    if name == "backbone":
        return backbone_layout
    return is_model_entry(name)


def backbone_layout(name: str) -> bool:
    return name in BACKBONE_FILES or SHARD.fullmatch(name) is not None or staged(name)


def missing_part(path: Path) -> str:
    """Where a missing local ``path`` stops existing, in words: `` (runs/ holds no mdoel)``."""
    path = Path(path)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.exists() or parent == Path("."):
        return ""
    return f" ({parent}/ holds no {path.relative_to(parent).parts[0]})"


def atomic_write(path: Path, write: Any) -> None:
    """Call ``write(temporary_path)`` then rename the result onto ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=leftover_prefix(path.name, "tmp"))
    os.close(handle)
    try:
        write(temporary)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=2) + "\n"))


def save_metadata(
    directory: str | Path, kind: str, config: dict, vocab: dict, **extra: Any
) -> None:
    """Write config.json (with the model kind and bistack version) and vocab.json."""
    directory = Path(directory)
    meta = {"kind": kind, "bistack_version": __version__, "config": config, **extra}
    write_json(directory / CONFIG, meta)
    write_json(directory / VOCAB, vocab)


def save_weights(
    directory: str | Path, model: nn.Module, exclude_prefix: str | None = None
) -> None:
    """Write the model's state dict as safetensors (contiguous, unshared copies), leaving out
    entries under ``exclude_prefix`` (a submodule saved elsewhere)."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    state = {
        k: v.detach().contiguous().clone()
        for k, v in model.state_dict().items()
        if exclude_prefix is None or not k.startswith(exclude_prefix)
    }
    path = Path(directory) / WEIGHTS
    try:
        atomic_write(path, lambda tmp: save_file(state, tmp))
    except SafetensorError as error:  # safetensors reports a full disk as its own error
        raise ModelFileError(f"{path}: cannot write the weights ({error})") from None


def load_metadata(
    directory: str | Path, kind: str, meta: dict[str, Any] | None = None
) -> tuple[dict, dict]:
    """Read config.json (unless given as ``meta``, already read by :func:`read_config`) and
    vocab.json, checking the directory holds a model of ``kind``."""
    directory = Path(directory)
    for name in (CONFIG, VOCAB, WEIGHTS):
        require_readable(directory, name)
    meta = read_config(directory) if meta is None else meta
    if meta["kind"] != kind:
        raise ModelFileError(
            f"{directory}: holds a {meta['kind']!r} model, not a {kind!r} one; "
            "bistack.load_model loads any kind"
        )
    return meta, read_json_object(directory / VOCAB)


def require_readable(directory: Path, name: str) -> None:
    """ModelFileError unless ``directory/name`` is a file this process may read: a missing
    file, a folder or broken link in its place, and a file it may not read are each said as
    what they are."""
    path = directory / name
    if path.is_file():
        if not os.access(path, os.R_OK):
            raise ModelFileError(f"{path}: not readable by this user (permission denied)")
        return
    if path.is_symlink() and not path.exists():
        raise ModelFileError(f"{path}: a link to {os.readlink(path)}, which is not there")
    if path.exists():
        raise ModelFileError(f"{path}: not a file; expected the model's {name}")
    _check_is_model_directory(directory)
    raise ModelFileError(f"{directory}: missing {name}; is this a bistack model directory?")


def read_config(directory: str | Path) -> dict[str, Any]:
    """config.json of a model directory, with ``kind`` naming the model kind, also for
    directories written before kinds were explicit (their config is left as written: building
    it into its config class reads the earlier layout)."""
    directory = Path(directory)
    if not (directory / CONFIG).is_file():
        _check_is_model_directory(directory)
        raise ModelFileError(f"{directory}: missing {CONFIG}; is this a bistack model directory?")
    meta = read_json_object(directory / CONFIG)
    config = meta.get("config")
    if not isinstance(config, dict):
        raise ModelFileError(f"{directory / CONFIG}: no config object; was it edited by hand?")
    try:
        kind = kind_named(config, source=str(directory / CONFIG))
    except ConfigError as error:
        raise ModelFileError(str(error)) from None
    return meta | {"kind": kind}


def checked_output_scheme(directory: str | Path, meta: dict[str, Any]) -> str:
    """A tagger's ``output_scheme`` from its config.json, checked to be a scheme."""
    from bistack.schemes import OUTPUT_SCHEMES

    scheme = meta["output_scheme"]  # missing: the loader's reading_model names it
    if scheme not in OUTPUT_SCHEMES:
        raise ModelFileError(
            f"{Path(directory) / CONFIG}: output_scheme {scheme!r} is not a scheme "
            f"({', '.join(OUTPUT_SCHEMES)})"
        )
    return str(scheme)


def model_kind(directory: str | Path) -> str:
    """The kind of model a directory holds ("tagger", "layer_classifier", ...)."""
    return str(read_config(directory)["kind"])


def _check_is_model_directory(directory: Path) -> None:
    if not directory.is_dir():
        raise ModelFileError(f"{directory}: no such model directory{missing_part(directory)}")


def load_weights(directory: str | Path, model: nn.Module) -> None:
    """Load ``model.safetensors`` into ``model``; weights that are not finite are refused."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(directory) / WEIGHTS
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError) as error:
        raise ModelFileError(f"{path}: not a readable safetensors file ({error})") from None
    for name, tensor in state.items():
        if tensor.is_floating_point() and not bool(tensor.isfinite().all()):
            raise ModelFileError(f"{path}: weight {name} holds values that are not finite")
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        first = str(error).splitlines()[0]
        raise ModelFileError(f"{path}: weights do not fit the config ({first})") from None


@contextmanager
def reading_model(
    directory: str | Path, files: str = "config.json or vocab.json"
) -> Iterator[None]:
    """Turn what a hand-edited or damaged ``files`` make fail while a model is rebuilt (a
    missing key, a value of the wrong type) into one clear error."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, AssertionError, IndexError) as error:
        if isinstance(error, BistackError):
            raise
        detail = f"missing {error}" if isinstance(error, KeyError) else str(error).split("\n")[0]
        raise ModelFileError(
            f"{directory}: {files} is damaged ({detail}); retrain, or restore the files bistack "
            "wrote"
        ) from None


def read_json_object(path: Path) -> dict:
    """The JSON object in ``path``; not JSON, or not an object, is an error naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ModelFileError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ModelFileError(f"{path}: expected a JSON object")
    return data
