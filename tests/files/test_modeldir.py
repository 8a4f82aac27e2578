"""Model files are written atomically, with the permissions any other file would get."""

import os

import pytest

from bistack.files.modeldir import atomic_write, write_json


def test_written_files_get_the_usual_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "config.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "config.json").stat().st_mode & 0o777 == 0o644


def test_a_failed_write_leaves_neither_a_file_nor_a_temporary(tmp_path):
    def explode(temporary):
        with open(temporary, "w") as handle:
            handle.write("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "model.safetensors", explode)
    assert list(tmp_path.iterdir()) == []
