"""Every folder and file bistack writes takes the mode the user's umask gives (``drwxr-xr-x``
under 022), as a service account serving the model must be able to read it: a staging folder
made with ``mkdtemp`` (mode 0700) and renamed into place kept 0700 before."""

import os
import stat
from pathlib import Path

import pytest
import yaml

from bistack.cli import main
from tests.cv.test_cross_validation import write_config, write_rows


def wrong_modes(root: Path, umask: int) -> list[str]:
    """Every path under ``root`` (and ``root``) whose permission bits are not the umask's."""
    wrong = []
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        wanted = (0o777 if path.is_dir() else 0o666) & ~umask
        if mode != wanted:
            wrong.append(f"{path.relative_to(root.parent)} {oct(mode)} (not {oct(wanted)})")
    return wrong


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_train_cv_export_and_report_write_with_the_umasks_mode(tmp_path, umask, capsys):
    pytest.importorskip("onnxruntime", reason="export needs the onnx extra (bistack[onnx])")
    config = write_config(tmp_path, write_rows(tmp_path / "train.tsv", 24))
    data = yaml.safe_load(config.read_text())
    data["data"]["dev_fraction"] = 0.25
    single = tmp_path / "single.yaml"
    single.write_text(yaml.safe_dump(data))
    before = os.umask(umask)
    try:
        out = tmp_path / "written"
        assert main(["train", str(single), "--output", str(out / "run"), "--no-progress"]) == 0
        cv = ["cv", str(config), "--output", str(out / "cv"), "--folds", "2", "--no-progress"]
        assert main(cv) == 0
        export = ["export", str(out / "cv" / "model"), "--output", str(out / "export")]
        assert main(export) == 0
        report = ["evaluate", str(out / "run" / "model"), str(tmp_path / "train.tsv")]
        assert main([*report, "--report", str(out / "report")]) == 0
    finally:
        os.umask(before)
    capsys.readouterr()
    assert wrong_modes(out, umask) == []
