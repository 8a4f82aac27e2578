"""train.compile: a fine-tuned transformer is compiled for training (torch.compile, in place),
trains to the very weights it trains to uncompiled on the same padded batches, and saves them
under their own names, compiling a handful of graphs over varied lengths (reported); a
model that fine-tunes no transformer refuses it by name.

Compiling with inductor costs ~25 s on this CPU, so the suite compiles with dynamo's eager
backend: the graphs are captured as they would be, then run op by op."""

from __future__ import annotations

import pytest
import torch
import yaml
from safetensors.torch import load_file

from bistack.cli import main
from tests.fixtures.written_models.make_fixtures import configs, write_data

pytest.importorskip("transformers", reason="needs bistack[transformers]")


def test_a_compiled_backbone_trains_to_the_same_weights_and_saves_them_by_name(
    tmp_path, monkeypatch, capsys
):
    write_data(tmp_path / "out", tmp_path)
    config = configs(tmp_path)["tiny_layer_classifier"]
    config["train"] = {**config["train"], "max_epochs": 1}
    config["backbone"] = {**config["backbone"], "finetune": True}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    compiled = []
    real = torch.compile

    def eager_compile(*args, **kwargs):
        compiled.append(args[0])
        return real(*args, **kwargs, backend="eager")

    # Uncompiled, on the batches a compiled run pads to its widths (dropout draws over the
    # padded width, so other widths would train otherwise).
    monkeypatch.setattr(torch, "compile", lambda function, *args, **kwargs: function)
    argv = ["train", str(path), "--no-progress", "--set", "train.compile=true", "--output"]
    assert main([*argv, str(tmp_path / "plain")]) == 0
    monkeypatch.setattr(torch, "compile", eager_compile)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    try:
        assert main([*argv, str(tmp_path / "compiled")]) == 0
        graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()  # nothing compiled is left to the tests after this one
    assert "train.compile: the fine-tuned transformer is compiled" in capsys.readouterr().out
    assert len(compiled) == 1
    assert graphs > 0  # the encoder was traced
    plain = load_file(tmp_path / "plain" / "model" / "model.safetensors")
    trained = load_file(tmp_path / "compiled" / "model" / "model.safetensors")
    assert plain.keys() == trained.keys()
    assert not [name for name in trained if "_orig_mod" in name]
    for name, weights in plain.items():
        torch.testing.assert_close(trained[name], weights, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize(
    "name, sets", [("tagger", []), ("tiny_layer_classifier", ["backbone.finetune=false"])]
)
def test_a_model_that_fine_tunes_no_transformer_refuses_it(name, sets, tmp_path, capsys):
    write_data(tmp_path / "out", tmp_path)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(configs(tmp_path)[name]))
    sets = [item for value in [*sets, "train.compile=true"] for item in ("--set", value)]
    argv = ["train", str(path), "--no-progress", "--output", str(tmp_path / "run"), *sets]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "train.compile compiles a fine-tuned transformer; this model fine-tunes none" in err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_varied_lengths_compile_a_handful_of_graphs_reported_in_the_log_and_metrics(
    tmp_path, monkeypatch, capsys
):
    """Texts of 1 to 40 words in batches of 7 (the last smaller) and dev's batches: with the
    widths padded to buckets (each width's graph static, any number of rows), a handful of
    graphs; without the buckets, one a width. The count is in each epoch's line and in
    metrics.csv."""
    from bistack.data import subwords
    from tests.text_models.test_end_to_end import write_tsv

    write_data(tmp_path / "out", tmp_path)
    words = ["the", "big", "word", "a", "long", "x"]
    rows = [(" ".join(words[i % 6] for i in range(n)), n % 2) for n in range(1, 41)]
    write_tsv(tmp_path / "varied.tsv", rows)
    dev = [(" ".join(words[i % 6] for i in range(n)), n % 2) for n in range(1, 41, 3)]
    write_tsv(tmp_path / "varied-dev.tsv", dev)  # other lengths, in batches of their own
    config = configs(tmp_path)["tiny_layer_classifier"]
    config["data"] = {**config["data"], "train": str(tmp_path / "varied.tsv"),
                      "dev": str(tmp_path / "varied-dev.tsv")}  # fmt: skip
    config["train"] = {**config["train"], "max_epochs": 1, "batch_size": 7}
    config["backbone"] = {**config["backbone"], "finetune": True}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda *a, **k: real(*a, **k, backend="eager"))
    counted = {}
    for bucketed in (True, False):
        if not bucketed:  # as without the buckets: every width its own graph
            monkeypatch.setattr(subwords, "bucket", lambda width, limit: width)
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        output = tmp_path / f"run-{bucketed}"
        argv = ["train", str(path), "--no-progress", "--output", str(output)]
        try:
            assert main([*argv, "--set", "train.compile=true"]) == 0
        finally:
            torch._dynamo.reset()
        said = capsys.readouterr().out
        metrics = (output / "metrics.csv").read_text().splitlines()
        column = metrics[0].split(",").index("compiled_graphs")
        counted[bucketed] = int(metrics[-1].split(",")[column])
        assert f"{counted[bucketed]} graphs compiled]" in said
        if bucketed:  # every batch compiled: none past the recompile limit
            assert "ran uncompiled" not in said
    assert 1 <= counted[True] <= 6, counted  # a width each (a one-row batch read as two)
    assert counted[False] > counted[True], counted
    # Past the recompile limit (here, one graph: more widths than the run allowed for), the
    # run says its batches ran uncompiled.
    from bistack.runs import loop

    real_compile = loop.compile_backbones
    monkeypatch.setattr(loop, "compile_backbones", lambda model: real_compile(model) and 1)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    argv = ["train", str(path), "--no-progress", "--output", str(tmp_path / "limited")]
    try:
        with torch._dynamo.config.patch(recompile_limit=1):
            assert main([*argv, "--set", "train.compile=true"]) == 0
    finally:
        torch._dynamo.reset()
    assert "some batches ran uncompiled" in capsys.readouterr().out


def test_five_widths_with_a_dev_set_compile_no_more_graphs_than_they_need_and_none_falls_back(
    tmp_path, monkeypatch, capsys
):
    """Texts of 1 to 200 words over an encoder of 256 positions: batches of every width from
    16 to 256 subwords, one-row batches among them, and dev scored without gradients a text at
    a time. Each width compiles a graph for training and one for scoring (the 4-D attention
    mask's rows marked dynamic as the ids', a one-row batch copied, not a stride-0 view), and
    the run raises dynamo's recompile limit to cover them: no batch runs uncompiled. With the
    limit left at 8 this run falls back (checked by hand); on this tiny encoder under the eager
    backend an unmarked mask or a stride-0 row adds no graph past the bound, so those two are
    held by the bound alone."""
    from tests.fixtures.written_models.make_fixtures import tiny_transformer
    from tests.text_models.test_end_to_end import write_tsv

    write_data(tmp_path / "out", tmp_path)
    words = ["the", "big", "word", "a", "long", "x"]
    lengths = [1, 3, 9, 20, 25, 40, 50, 90, 110, 120, 150, 200, 7, 60]
    rows = [(" ".join(words[i % 6] for i in range(n)), n % 2) for n in lengths * 2]
    write_tsv(tmp_path / "wide.tsv", rows)
    dev = [(" ".join(words[i % 6] for i in range(n)), n % 2) for n in (2, 30, 100, 190, 12)]
    write_tsv(tmp_path / "wide-dev.tsv", dev)
    config = configs(tmp_path)["tiny_layer_classifier"]
    config["data"] = {**config["data"], "train": str(tmp_path / "wide.tsv"),
                      "dev": str(tmp_path / "wide-dev.tsv")}  # fmt: skip
    backbone = tiny_transformer(tmp_path / "wide-bert", positions=256)
    # dev's texts one at a time (backbone.batch_size): a graph of its own for each width
    trained = {"path": str(backbone), "finetune": True, "batch_size": 1}
    config["backbone"] = {**config["backbone"], **trained}
    config["train"] = {**config["train"], "max_epochs": 2, "batch_size": 3, "eval_batch_size": 1}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda *a, **k: real(*a, **k, backend="eager"))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    argv = ["train", str(path), "--no-progress", "--output", str(tmp_path / "wide")]
    try:
        with torch._dynamo.config.patch(recompile_limit=8):  # PyTorch's default
            assert main([*argv, "--set", "train.compile=true"]) == 0
            graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
            assert torch._dynamo.config.recompile_limit == 8  # put back after the run
    finally:
        torch._dynamo.reset()
    said = capsys.readouterr().out
    assert "ran uncompiled" not in said, said
    # five widths; more graphs than dynamo's default limit (8) allows, which the run raised
    assert 8 < graphs <= 2 * 5 + 2, graphs
