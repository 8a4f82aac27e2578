"""On a GPU a tagger's training step is launch-bound, so bistack's step launches at most 1.1x
the operators of the hand-written floor of ``benchmarks/gpu.py`` doing the same work (the
recipe's BiLSTM-CRF: the same batches prebuilt on the device, the same CRF scan, dropout,
unknown-word replacement and optimizer kind), counted on this CPU with the code's GPU paths
taken (:func:`tests.runs.test_host_reads.as_on_a_gpu`) and recurrences counted as cuDNN runs
them (:mod:`tests.devices.launches`). A predicted batch's ratio is printed beside it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.benchmarks.test_gpu_benchmark import benchmark_module
from tests.conftest import tiny_sentences, write_conll
from tests.devices.launches import launches
from tests.runs.test_host_reads import as_on_a_gpu


def test_the_count_takes_a_recurrence_as_one_launch_each_way_and_skips_views():
    lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True)
    inputs = torch.randn(2, 5, 3, requires_grad=True)
    packed = nn.utils.rnn.pack_padded_sequence(inputs, torch.tensor([5, 3]), batch_first=True)

    def step() -> None:
        out, _ = lstm(packed)
        out.data.view(-1).sum().backward()

    counted = launches(step)
    assert counted["lstm (one cuDNN call)"] == 1
    assert counted["lstm backward (one cuDNN call)"] == 1
    assert "aten.view" not in counted and "aten.sigmoid" not in counted
    assert counted["aten.sum"] == 1


def test_a_tagger_training_step_launches_at_most_a_tenth_more_than_the_floor(tmp_path, monkeypatch):
    pytest.importorskip("torchcrf", reason="the floor's module uses pytorch-crf (the dev extra)")
    gpu = benchmark_module("gpu")
    torch.set_num_threads(1)
    as_on_a_gpu(monkeypatch)
    train = write_conll(tmp_path / "train.txt", tiny_sentences(96, seed=0))
    sentences = [(s.tokens, s.tags) for s in gpu.read_conll(train)]
    built = gpu.recipe_tagger(sentences, torch.device("cpu"), None)
    vocabulary = gpu.FloorVocabulary(built.pairs)
    torch.manual_seed(0)
    floor = gpu.Floor(
        len(vocabulary.words) + 2,
        len(vocabulary.chars) + 1,
        len(vocabulary.tags),
        singletons=vocabulary.singletons,
        unk_replace=built.config.features.unk_replace,
    )
    floor_optimizer = gpu.same_kind(built.optimizer, floor.parameters(), lr=1e-3)
    encoded = gpu.floor_encode(built.pairs, vocabulary)
    cpu = torch.device("cpu")
    floor_batches = [gpu.floor_collate([encoded[i] for i in b], cpu) for b in built.batches]
    clip = built.config.optimizer.grad_clip

    def floor_epoch() -> None:
        floor.train()
        for batch in floor_batches:
            floor_optimizer.zero_grad(set_to_none=True)
            floor.loss(batch).backward()
            nn.utils.clip_grad_norm_(floor.parameters(), clip)
            floor_optimizer.step()

    def ours_epoch() -> None:
        plan = gpu.EpochPlan(clip)
        gpu.run_epoch(built.fabric, built.wrapped, built.optimizer, built.prebuilt,
                      built.batches, plan)  # fmt: skip

    for epoch in (floor_epoch, ours_epoch):
        epoch()  # warm-up: the optimizers' states made
    ours, theirs = launches(ours_epoch), launches(floor_epoch)
    steps = len(built.batches)
    ratio = sum(ours.values()) / sum(theirs.values())
    extra = {op: n - theirs[op] for op, n in ours.items() if n > theirs[op]}
    print(f"training step: bistack {sum(ours.values()) / steps:.0f} launches, the floor "
          f"{sum(theirs.values()) / steps:.0f} ({ratio:.3f}x); more: {extra}")  # fmt: skip
    assert steps >= 3
    assert ratio <= 1.1, f"bistack launches {ratio:.3f}x the floor's a step; more: {extra}"

    model, decoder = built.model, built.model.head.decoder()
    chunk = list(range(len(built.pairs)))
    ours_batch = gpu.prebuilt_batch(built.task, chunk, cpu)
    floor_batch = gpu.floor_collate([encoded[i] for i in chunk], cpu)

    def ours_predict() -> None:
        model.eval()
        with torch.inference_mode():
            emissions = model.emissions(ours_batch).float().cpu().numpy()
            decoder.analyse(emissions, ours_batch.lengths.tolist(), confidence=False)

    floor.eval()
    predicted = launches(ours_predict), launches(lambda: floor.predict(floor_batch))
    print(f"predicted batch of {len(chunk)}: bistack {sum(predicted[0].values())} launches, "
          f"the floor {sum(predicted[1].values())}")  # fmt: skip
