"""benchmarks/gpu.py runs every row on the CPU at tiny sizes (``--device cpu``), so the script a
GPU session runs in its few minutes has run here first: every row measured, the report written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_sentences, write_conll
from tests.fixtures.written_models.make_fixtures import tiny_transformer

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_is_measured_and_reported(tmp_path):
    pytest.importorskip("transformers", reason="its encoder rows need bistack[transformers]")
    pytest.importorskip("torchcrf", reason="its floor uses pytorch-crf (the dev extra)")
    train = write_conll(tmp_path / "train.txt", tiny_sentences(60, seed=0))
    encoder = tiny_transformer(tmp_path / "tiny-bert")
    command = [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--train", str(train)]
    command += ["--device", "cpu", "--backbone", str(encoder), "--large", str(encoder)]
    command += ["--large-texts", "16", "--out", str(tmp_path / "out")]
    environment = os.environ | {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["row"] for row in json.loads((tmp_path / "out" / "gpu.json").read_text())}
    assert rows >= {
        "floor-softmax", "floor-crf", "bistack-train", "bistack-train-bf16-mixed",
        "bistack-predict-b256", "bistack-predict-confidences-b256", "bistack-predict-b1",
        "bistack-profile", "feature-cache", "large-finetune-fp32", "large-finetune-bf16-mixed",
    }  # fmt: skip
    report = (tmp_path / "out" / "gpu.md").read_text()
    assert "BiLSTM-CRF training epoch" in report and "frozen feature cache" in report
