"""benchmarks/gpu.py, run on the CPU at tiny sizes, so the script a GPU session runs in its few
minutes has run here first; and its method kept honest: every comparison's two timers hold the
same stages and step the same kind of optimizer (read by tracing each timed closure), every
side is warmed up and measured 3 times."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_sentences, write_conll
from tests.fixtures.written_models.make_fixtures import tiny_transformer

ROOT = Path(__file__).resolve().parents[2]


def benchmark_module(name: str):
    """``benchmarks/NAME.py`` imported (the folder is not a package)."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def modules():
    pytest.importorskip("transformers", reason="its encoder rows need bistack[transformers]")
    pytest.importorskip("torchcrf", reason="its floor uses pytorch-crf (the dev extra)")
    return benchmark_module("timed"), benchmark_module("gpu")


def test_every_row_times_the_same_stages_on_both_sides_and_is_reported(modules, tmp_path):
    timed, gpu = modules
    torch.set_num_threads(1)
    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    encoder = tiny_transformer(tmp_path / "tiny-bert")
    args = argparse.Namespace(
        backbone=str(encoder),
        large=str(encoder),
        large_texts=4,
        large_length=12,
        compile=False,
        crf_sentences=8,
        frozen_shape=[32, 2, 2],
        frozen_length=8,
    )
    sentences = [(s.tokens, s.tags) for s in gpu.read_conll(train)]
    comparisons = gpu.comparisons(args, torch.device("cpu"), sentences)
    rows = {c.row for c in comparisons}
    assert rows >= {
        "train-device", "train-from-ids", "train-device, bf16-mixed", "predict-from-tokens",
        "predict-device", "predict-one", "predict-confidences", "feature-cache",
        "train-device, pytorch-crf", "predict-device, pytorch-crf",
        "finetune-b16-fp32", "finetune-b64-fp32", "finetune-b16-bf16-mixed", "frozen-pass-bf16",
        "train-device, softmax head", "predict-device, softmax head",
        *(f"crf-{stage}-{tags}" for stage in ("train", "decode") for tags in (9, 17, 37, 73)),
    }  # fmt: skip
    problems = []
    for comparison in comparisons:
        found = timed.unequal_stages(comparison)
        if "stages_differ" in comparison.extra:  # said in the report, beside the row
            assert found, f"{comparison.row} says its stages differ, yet they do not"
        else:
            problems += found
    assert not problems, "\n".join(problems)
    frozen = next(c for c in comparisons if c.row == "frozen-pass-bf16")
    measured = [gpu.measured(torch.device("cpu"), c) for c in [*comparisons[:3], frozen]]
    for row in measured:
        for side in ("bistack", "floor"):
            assert len(row[side]["runs_s"]) == timed.REPEATS
            assert row[side]["min_s"] <= row[side]["median_s"] <= row[side]["max_s"]
    report = gpu.report(measured, torch.device("cpu"), len(sentences))
    assert "BiLSTM-CRF training epoch, batches prebuilt on the device" in report
    # bfloat16's states against float32's: close, and said beside the row
    assert 0.99 < measured[-1]["cosine"]["worst"] <= measured[-1]["cosine"]["mean"] <= 1.0 + 1e-6
    assert "encoder of 2 layers x 32, batch 64, 8 subwords, bf16-mixed against float32" in report
    assert f"cosine of the last 4 layers' states {measured[-1]['cosine']['mean']:.5f}" in report


def test_the_check_names_a_stage_only_one_timer_holds_and_another_optimizer(modules):
    """The check can fail: a floor that collates inside its timer against a side that does not,
    and a foreach optimizer against a fused one."""
    timed, gpu = modules
    encoded = [([2, 3], [1, 0], [0, 1], [[1], [2]])]
    prebuilt = gpu.floor_collate(encoded, torch.device("cpu"))
    weights = [torch.nn.Parameter(torch.zeros(2))]
    loop = torch.optim.Adam(weights, foreach=True)
    fused = torch.optim.Adam(weights, fused=True)
    comparison = timed.Comparison(
        "toy",
        "a toy row",
        timed.Side("ours", lambda: prebuilt["words"].sum(), loop),
        timed.Side("floor", lambda: gpu.floor_collate(encoded, torch.device("cpu")), fused),
        per=1,
    )
    problems = timed.unequal_stages(comparison)
    assert "toy: only the floor's timer holds collation" in problems
    assert "toy: bistack steps ('Adam', 'foreach'), the floor ('Adam', 'fused')" in problems


def test_a_fine_tuning_step_issues_no_more_operators_than_a_plain_loop(modules, tmp_path):
    """On a tiny 24-layer encoder (where per-layer and per-group overheads show), bistack's
    fine-tuning epoch issues at most 1.05x the PyTorch operators of the plain loop doing the
    same work: the same model shape, parameter groups, optimizer kind and batches."""
    from torch.profiler import ProfilerActivity, profile

    _, gpu = modules
    torch.set_num_threads(1)
    encoder = tiny_transformer(tmp_path / "tiny-24", layers=24)
    (comparison,) = gpu.fine_tuning_comparisons(
        str(encoder), torch.device("cpu"), None, batch_size=4, texts=12, max_length=12
    )
    counts = {}
    for side in (comparison.ours, comparison.floor):
        side.work()  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as profiled:
            side.work()
        counts[side.label] = sum(1 for e in profiled.events() if e.name.startswith("aten::"))
    ours, plain = counts[comparison.ours.label], counts[comparison.floor.label]
    print(f"operators: bistack {ours}, the plain loop {plain}")
    assert ours <= 1.05 * plain, f"bistack {ours} operators, the plain loop {plain}"


def test_the_crf_rows_fill_the_choice_table_the_library_reads(modules, monkeypatch):
    """By stage, each measured tag count's winner at the rows' batch: where the loop won at 73
    tags and the scan at 17 (the scan's K³ work against the loop's K², as counted), the library
    sends 73 to the loop and 17 to the scan, and a count in between to the winner at the
    nearest measured count below it. A failed row says nothing; the table is the library's
    format, and the CRF rows time the scan whatever the shipped table says."""
    from bistack.kernels import crf_choice

    _, gpu = modules
    rows = [
        {"row": "crf-train-9", "ratio_time": 0.5},
        {"row": "crf-train-17", "ratio_time": 0.7},
        {"row": "crf-train-37", "ratio_time": 1.4},
        {"row": "crf-train-73", "ratio_time": 6.0},
        {"row": "crf-decode-9", "error": "cut"},
        {"row": "crf-decode-17", "ratio_time": 0.9},
        {"row": "crf-decode-73", "ratio_time": 15.0},
    ]
    table = gpu.crf_choice_table(rows, torch.device("cpu"))
    assert table["winners"] == {
        "train": {"9": "scan", "17": "scan", "37": "loop", "73": "loop"},
        "decode": {"17": "scan", "73": "loop"},
    }
    assert table["batch"] == gpu.CRF_SENTENCES and set(gpu.CRF_TAGS) >= {9, 17, 37, 73}
    assert table.keys() == crf_choice.table().keys()
    monkeypatch.setattr(crf_choice, "table", lambda: table)
    for stage in ("train", "decode"):
        assert crf_choice.takes_loop(stage, 73) and not crf_choice.takes_loop(stage, 17)
        assert not crf_choice.takes_loop(stage, 5)  # below every count: the smallest's winner
    assert crf_choice.takes_loop("train", 40) and not crf_choice.takes_loop("decode", 40)
    with gpu.scan_only():
        assert not crf_choice.takes_loop("train", 73)
    assert crf_choice.takes_loop("train", 73)


def test_a_row_that_raises_leaves_the_rows_after_it_measured(modules):
    """Each group of rows is built, measured and freed alone: one that fails to build, or a
    row that fails to run, is recorded with its error, and the rows after it are measured."""
    timed, gpu = modules

    def broken() -> list:
        raise RuntimeError("CUDA out of memory")

    def fine(name: str, fails: bool = False) -> list:
        def work() -> None:
            if fails:
                raise ValueError("a kernel is missing")

        return [
            timed.Comparison(name, name, timed.Side("ours", work), timed.Side("floor", work), 1)
        ]

    plans = [
        gpu.Planned(("compiled",), broken),
        gpu.Planned(("first",), lambda: fine("first", fails=True)),
        gpu.Planned(("second",), lambda: fine("second")),
    ]
    seen: list[int] = []
    rows = gpu.measure_each(plans, torch.device("cpu"), lambda rows: seen.append(len(rows)))
    assert [r["row"] for r in rows] == ["compiled", "first", "second"]
    assert "CUDA out of memory" in rows[0]["error"] and "kernel" in rows[1]["error"]
    assert rows[2]["ratio_time"] > 0 and seen == [1, 2, 3]  # written after every row
    report = gpu.report(rows, torch.device("cpu"), 1)
    assert "| compiled | building it: RuntimeError('CUDA out of memory') | | |" in report


def test_the_prepared_call_fits_the_device_tools_limit():
    """gpu_run.sh's fixed step timeouts sum to at most 540 s (the tool allows 600 s a call),
    the compile row runs early in a step of its own, the rows' gaps are named by a finish step
    after them, and the device checks come last with what is left of the shared budget: a
    minute at the least."""
    import re

    script = (ROOT / "benchmarks" / "gpu_run.sh").read_text()
    steps = re.findall(r"^\s*(?:if ! )?step (\S+) (\S+) ", script, re.M)
    fixed = {name: int(seconds) for name, seconds in steps if seconds.isdigit()}
    assert sum(fixed.values()) <= 540 and dict(steps)["checks"] == '"$budget"'
    # Every step at its limit still leaves the checks a minute: their three files take 36 s on
    # this CPU under load (2 cores, a 2-thread training beside them).
    assert 540 - sum(fixed.values()) >= 60
    names = [name for name, _ in steps]
    assert names.index("compile") < names.index("gpu") < names.index("finish")
    assert names[-1] == "checks"
    assert fixed["compile"] >= 180  # a cold CUDA compile of the large shape


def smoke(out, *settings: str) -> subprocess.CompletedProcess:
    """``make gpu-smoke``: the prepared call on the CPU at tiny shapes, as the suite runs it."""
    return subprocess.run(
        ["make", "-s", "gpu-smoke", f"GPU_SMOKE_OUT={out}", *settings],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.device_call
def test_the_prepared_call_runs_on_the_cpu_and_brings_back_every_row_in_few_files(tmp_path):
    done = smoke(tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "every step and row finished"
    files = sorted(p.name for p in (tmp_path / "out").rglob("*"))
    assert files == ["gpu.json", "gpu.md", "run.log"]  # at most 4: the device tool brings 8
    rows = json.loads((tmp_path / "out" / "gpu.json").read_text())
    assert [row["row"] for row in rows[:2]] == [
        "finetune-b16-bf16-mixed-compiled",  # against the plain loop
        "finetune-b16-bf16-mixed-compiled-vs-eager",  # against bistack eager
    ]
    assert rows[1]["floor_side"] == "bistack run_epoch"
    assert "frozen-pass-bf16" in {row["row"] for row in rows}
    assert not any("error" in row for row in rows)
    log = (tmp_path / "out" / "run.log").read_text()
    assert "=== compile (limit 180 s)" in log and "=== gpu (limit" in log


@pytest.mark.device_call
def test_the_prepared_call_fails_loudly_naming_each_step_and_row(tmp_path):
    done = smoke(tmp_path / "out", "GPU_SMOKE_DEVICE=nowhere")
    assert done.returncode != 0
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("failed: compile (exit 1); gpu (exit 1); row ")
    rows = json.loads((tmp_path / "out" / "gpu.json").read_text())
    why = "the compile step did not finish it (compile (exit 1))"
    assert rows[:2] == [
        {"row": "finetune-b16-bf16-mixed-compiled", "error": why},
        {"row": "finetune-b16-bf16-mixed-compiled-vs-eager", "error": why},
    ]
    assert len(rows) > 20 and all(row["error"].startswith("not reached") for row in rows[2:])
    for row in rows:  # every planned row named, in the last line and in gpu.md
        assert f"row {row['row']} - " in last
        assert f"| {row['row']} | " in (tmp_path / "out" / "gpu.md").read_text()


def test_the_hardware_floor_computes_what_pytorch_crf_computes(modules, tmp_path):
    """The floor's CRF (the scan kernels, the gold score as whole tensors) gives pytorch-crf's
    loss and best paths for the same weights: a faster floor, not another model."""
    _, gpu = modules
    train = write_conll(tmp_path / "train.txt", tiny_sentences(24, seed=0))
    pairs = [(s.tokens, s.tags) for s in gpu.read_conll(train)]
    vocabulary = gpu.FloorVocabulary(pairs)
    sizes = (len(vocabulary.words) + 2, len(vocabulary.chars) + 1, len(vocabulary.tags))
    torch.manual_seed(0)
    floor, users = gpu.Floor(*sizes).eval(), gpu.Floor(*sizes, users_crf=True).eval()
    users.load_state_dict(floor.state_dict(), strict=False)  # the network's weights alike
    users.crf.transitions.data = floor.transitions.data.clone()
    users.crf.start_transitions.data = floor.start.data.clone()
    users.crf.end_transitions.data = floor.end.data.clone()
    batch = gpu.floor_collate(gpu.floor_encode(pairs, vocabulary), torch.device("cpu"))
    with torch.no_grad():
        assert floor.loss(batch).item() == pytest.approx(users.loss(batch).item(), rel=1e-5)
    assert floor.predict(batch) == users.predict(batch)


def test_the_floor_waits_for_the_device_as_often_as_bistack(modules, tmp_path, monkeypatch):
    """What the stage check cannot see: as on a GPU (tests.devices.residency), a training step
    and a batch's tags make the host wait as often on both sides (no read in a step, one a
    batch for its tags) and copy onto the device blocking on neither."""
    from bistack.data.batching import collate_tagging
    from bistack.data.features import TokenVocabularies
    from bistack.taggers.networks.network import build_tagger
    from bistack.tasks import config_from_dict
    from tests.conftest import tiny_config
    from tests.devices.residency import device_residency, mark_model
    from tests.runs.test_host_reads import as_on_a_gpu

    _, gpu = modules
    train = write_conll(tmp_path / "train.txt", tiny_sentences(24, seed=0))
    pairs = [(s.tokens, s.tags) for s in gpu.read_conll(train)]
    vocabulary = gpu.FloorVocabulary(pairs)
    floor = gpu.Floor(len(vocabulary.words) + 2, len(vocabulary.chars) + 1, len(vocabulary.tags))
    vocabularies = TokenVocabularies.build(pairs, min_freq=1, lowercase=True, normalise_digits=True)
    ours = build_tagger(config_from_dict(tiny_config(str(train), None)), vocabularies)
    encoded = gpu.floor_encode(pairs, vocabulary)
    sides = {
        "bistack": (ours, lambda: collate_tagging([vocabularies.encode(*p) for p in pairs],
                                                  vocabularies).to("cpu")),
        "floor": (floor, lambda: gpu.floor_collate(encoded, torch.device("cpu"))),
    }  # fmt: skip
    as_on_a_gpu(monkeypatch)
    counted = {}
    for name, (network, collate) in sides.items():
        optimizer = torch.optim.Adam(network.parameters())
        mark_model(network)
        with device_residency(monkeypatch) as step:
            batch = collate()
            (network(batch) if name == "bistack" else network.loss(batch)).backward()
            optimizer.step()
        network.eval()
        if name == "bistack":
            network.head.decoder()  # its CRF's scores read once, then kept (as in steady state)
        with device_residency(monkeypatch) as tags, torch.no_grad():
            if name == "bistack":
                emissions = network.emissions(batch).float().cpu().numpy()
                network.head.decoder().analyse(emissions, batch.lengths.tolist(), False)
            else:
                network.predict(batch)
        counted[name] = [
            sum(c.values()) for c in (step.reads, step.copies, tags.reads, tags.copies)
        ]
    assert counted["bistack"] == counted["floor"] == [0, 0, 1, 0], counted


def test_the_crf_rows_floor_is_the_fields_loop_and_computes_what_bistack_does(modules):
    """The CRF-only rows' floor (a loop over positions, one step a position) decodes bistack's
    best paths, and both sides of each row run."""
    from bistack.crf import CRF

    _, gpu = modules
    torch.manual_seed(3)
    crf = CRF(7)
    emissions = torch.randn(6, 40, 7)
    lengths = torch.tensor([40, 31, 8, 17, 25, 9])
    mask = torch.arange(40)[None, :] < lengths[:, None]
    assert torch.equal(
        gpu.loop_viterbi(crf, emissions, mask) * mask, crf.decode(emissions, mask).best * mask
    )
    rows = {c.row: c for c in gpu.crf_comparisons(torch.device("cpu"), 7, sentences=6)}
    assert set(rows) == {"crf-train-7", "crf-decode-7"}
    for row in rows.values():  # both sides run, each its own work
        row.ours.work()
        row.floor.work()


def test_a_gpu_step_killed_halfway_leaves_every_row_it_did_not_reach_named(modules, tmp_path):
    """The call's last step compares gpu.json with the planned rows: each row the gpu step did
    not reach is recorded as not reached, and gpu.md is written again from gpu.json; a row a
    step recorded with its own error keeps it."""
    _, gpu = modules
    train = write_conll(tmp_path / "train.txt", tiny_sentences(12, seed=0))
    out = tmp_path / "out"
    out.mkdir()
    compiled = "finetune-b16-bf16-mixed-compiled"
    reached = [
        {"row": compiled, "error": "RuntimeError: its own words"},
        {"row": "train-device", "error": "ValueError: measured, and failed"},
    ]
    (out / "gpu.json").write_text(json.dumps(reached))
    (out / "gpu.md").write_text("stale: from a process that was killed\n")
    common = ["--out", str(out), "--train", str(train), "--device", "cpu", "--compile"]
    gpu.main([*common, "--missing", compiled, "the compile step timed out"])
    gpu.main([*common, "--finish"])
    rows = json.loads((out / "gpu.json").read_text())
    assert rows[:2] == reached  # each keeps its own error
    names = [row["row"] for row in rows]
    assert len(names) == len(set(names)) > 20 and {"crf-train-73", "crf-decode-9"} <= set(names)
    assert all(row["error"].startswith("not reached") for row in rows[2:])
    page = (out / "gpu.md").read_text()
    assert "stale" not in page and all(f"| {name} | " in page for name in names)


def test_ci_runs_the_prepared_calls_smoke_after_the_suite():
    """The call's smoke is outside ``make test`` (the marker ``device_call``), yet never
    unchecked: CI runs ``make gpu-smoke-test`` after the suite, and it selects both smoke
    tests."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("\nmake test\n") < ci.index("\nmake gpu-smoke-test\n")
    collect = ["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "device_call"]
    command = [sys.executable, "-m", "pytest", *collect, "tests/benchmarks/test_gpu_benchmark.py"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = done.stdout
    chosen = [line for line in collected.splitlines() if "::" in line]
    assert [line.rsplit("::", 1)[1] for line in chosen] == [
        "test_the_prepared_call_runs_on_the_cpu_and_brings_back_every_row_in_few_files",
        "test_the_prepared_call_fails_loudly_naming_each_step_and_row",
    ]
