"""Every config shipped in configs/ parses, so a typo there fails here, not in a user's run."""

from pathlib import Path

import pytest

from bistack.tasks import load_config

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_parses(path):
    config = load_config(path)
    assert config.train.max_epochs >= 1


def test_there_are_configs():
    assert len(CONFIGS) >= 6


def test_a_recorded_config_without_newer_keys_still_matches():
    from bistack.config import same_settings
    from bistack.tasks import config_from_dict

    config = config_from_dict({"kind": "classifier", "data": {"train": "t.tsv"}})
    recorded = config.to_dict()
    del recorded["regression"]  # written before the section existed
    assert same_settings(recorded, config)
    recorded["train"]["max_epochs"] = 99
    assert not same_settings(recorded, config)
    assert not same_settings({"task": "nonsense"}, config)


def test_exponent_floats_without_a_dot_are_numbers(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("task: classification\ndata: {train: t.tsv}\noptimizer: {lr: 5e-5}\n")
    assert load_config(path).optimizer.lr == 5e-5
    path.write_text("task: classification\ndata: {train: t.tsv}\noptimizer: {lr: fast}\n")
    from bistack.errors import ConfigError

    with pytest.raises(ConfigError, match=r"optimizer\.lr must be float, got 'fast'"):
        load_config(path)
