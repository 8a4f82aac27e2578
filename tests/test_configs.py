"""Every config shipped in configs/ parses, so a typo there fails here, not in a user's run."""

from pathlib import Path

import pytest

from bistack.config import load_config

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_parses(path):
    config = load_config(path)
    assert config.train.max_epochs >= 1


def test_there_are_configs():
    assert len(CONFIGS) >= 6
