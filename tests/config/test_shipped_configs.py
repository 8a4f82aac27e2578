"""Every config shipped in configs/ parses, so a typo there fails here, not in a user's run."""

from pathlib import Path

import pytest

from bistack.tasks import config_from_dict, load_config, read_config_file

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_parses(path):
    """Each recipe builds into its config (its data, which an example writes or a checkout
    keeps in ../shared, is checked when it trains)."""
    config = config_from_dict(read_config_file(path), str(path))
    assert config.train.max_epochs >= 1


def test_there_are_configs():
    assert len(CONFIGS) >= 6


def test_a_recorded_config_without_newer_keys_still_matches():
    from bistack.config.files import same_settings
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


def test_configs_written_for_earlier_versions_read_as_today(tmp_path):
    from bistack.errors import ConfigError

    old = tmp_path / "old.yaml"
    old.write_text(
        "task: regression\ndata: {train: t.tsv}\n"
        "train: {dropout: 0.2, calibrate: true, max_epochs: 3}\n"
    )
    new = tmp_path / "new.yaml"
    new.write_text(
        "kind: regressor\ndata: {train: t.tsv}\nencoder: {outer_dropout: 0.2}\n"
        "regression: {calibrate: true}\ntrain: {max_epochs: 3}\n"
    )
    assert load_config(old).to_dict() == load_config(new).to_dict()
    # A moved key in a today's-form config, or on the command line, still works...
    plain = tmp_path / "plain.yaml"
    plain.write_text("kind: regressor\ndata: {train: t.tsv}\n")
    assert load_config(plain, ["train.dropout=0.4"]).encoder.outer_dropout == 0.4
    # ...or, given beside the key that replaced it, names that key.
    with pytest.raises(ConfigError, match=r"train.dropout is now encoder.outer_dropout"):
        load_config(new, ["train.dropout=0.4"])
    layers = tmp_path / "layers.yaml"
    layers.write_text("kind: layer_classifier\ndata: {train: t.tsv}\ntrain: {dropout: 0.3}\n")
    with pytest.raises(ConfigError, match=r"their dropout is layer_pooling.dropout"):
        load_config(layers)
    with pytest.raises(ConfigError, match=r"regression.calibrate is for regressors"):
        load_config(new, ["kind=classifier"])
    backbone = tmp_path / "backbone.yaml"
    backbone.write_text("task: tagging\ndata: {train: t.txt}\nbackbone: {path: default}\n")
    assert load_config(backbone).kind == "layer_tagger"


def test_a_section_given_in_part_keeps_the_kinds_defaults_for_the_rest():
    layer = config_from_dict(
        {"kind": "layer_classifier", "data": {"train": "t.tsv"}, "optimizer": {"lr": 0.0005}}
    )
    assert (layer.optimizer.name, layer.optimizer.lr) == ("adamw", 0.0005)
    assert (layer.optimizer.lr_decay, layer.optimizer.grad_clip) == (0.0, 1.0)
    language_model = config_from_dict(
        {"kind": "language_model", "data": {"train": "c.txt"}, "encoder": {"hidden_size": 32}}
    )
    assert not language_model.encoder.bidirectional  # not the class default, which is refused
    assert language_model.encoder.outer_dropout == 0.3
    tagger = config_from_dict({"kind": "tagger", "data": {"train": "t.txt"}, "optimizer": {}})
    assert tagger.optimizer == type(tagger.optimizer)()  # a tagger's defaults are the class's


def test_stacked_features_of_a_layer_tagger_are_off_unless_a_section_is_given():
    from bistack.config import FeaturesConfig
    from bistack.errors import ConfigError

    base = {"kind": "layer_tagger", "data": {"train": "t.txt"}}
    assert config_from_dict(base).features is None
    assert config_from_dict(base | {"features": None}).features is None
    # A section, even empty, stacks the recurrent tagger's features, as given.
    assert config_from_dict(base | {"features": {}}).features == FeaturesConfig()
    assert config_from_dict(base | {"features": {"word_dim": 50}}).features.char_encoder == "lstm"
    for features, problem in [
        ({"word_dim": 0, "casing_dim": 0, "char_encoder": "none"}, "every feature is off"),
        ({"word_dim": 0, "pretrained": "v.txt"}, "needs a word embedding"),
    ]:
        with pytest.raises(ConfigError, match=problem):
            config_from_dict(base | {"features": features})
    with pytest.raises(ConfigError, match=r"part_dropout\.words is set, but the features have no"):
        config_from_dict(base | {"part_dropout": {"words": 0.2}})
    assert config_from_dict(base | {"part_dropout": {"transformer": 0.2}}).part_dropout
    with pytest.raises(ConfigError, match="every feature is off"):
        config_from_dict(
            {"kind": "tagger", "data": {"train": "t.txt"}}
            | {"features": {"word_dim": 0, "casing_dim": 0, "char_encoder": "none"}}
        )
