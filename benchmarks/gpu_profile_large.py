"""Where a fine-tuning step of a large encoder spends its time, float32 (TF32) and bf16-mixed.

A layer classifier (BiLSTM over the layers' CLS vectors) over a BERT-large-shaped encoder
(``../shared/gpu/make_backbone.py SRC DST 1024 24 16``), fine-tuned at 256 subwords, batch 16:
three of the training loop's steps under the profiler after a warm-up epoch, the operators by
device time and by host time. Device time far under host time means the step waits on Python
and kernel launches, not on the GPU.

  python benchmarks/gpu_profile_large.py LARGE_DIR      prints the tables
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from bistack.data.buckets import bucket_batches
from bistack.runs.loop import optimizer_for, run_epoch, start_run
from bistack.tasks import config_from_dict, task_of


def main(large: str) -> None:
    torch.set_float32_matmul_precision("high")
    rng = random.Random(0)
    words = (Path(large) / "vocab.txt").read_text(encoding="utf-8").split()
    vocabulary = [w for w in words if w.isalpha() and w.islower()][:5000]
    work = Path(tempfile.mkdtemp())
    table = work / "train.tsv"
    rows = [" ".join(rng.choices(vocabulary, k=300)) + f"\t{rng.randint(0, 1)}" for _ in range(96)]
    table.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    for precision in (None, "bf16-mixed"):
        config = config_from_dict(
            {
                "kind": "layer_classifier",
                "data": {
                    "train": str(table),
                    "dev": str(table),
                    "text_column": "sentence",
                    "label_columns": ["label"],
                },
                "backbone": {"path": large, "finetune": True, "max_length": 256},
                "layer_pooling": {"type": "lstm", "lstm_hidden": 256},
                "optimizer": {"name": "adamw", "lr": 1e-5},
                "train": {"batch_size": 16},
            }
        )
        run = start_run(work / f"run-{precision}", 1, devices=1, strategy="auto",
                        accelerator="cuda", precision=precision)  # fmt: skip
        prepared = task_of(config.kind).prepare(config, run)
        fabric, model = run.fabric, prepared.network
        wrapped, optimizer = fabric.setup(model, optimizer_for(fabric, config.optimizer, model))
        lengths = prepared.loop.train_lengths()
        batches = bucket_batches(lengths, 16, shuffle=True, seed=1, pool=50)
        run_epoch(fabric, wrapped, optimizer, prepared.loop, batches, 1.0, lambda _: 1.0, "", False)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiled:
            run_epoch(fabric, wrapped, optimizer, prepared.loop, batches[:3], 1.0,
                      lambda _: 1.0, "", False)  # fmt: skip
            torch.cuda.synchronize()
        events = profiled.key_averages()
        print(f"===== {precision or 'float32 (TF32 matmuls)'}", flush=True)
        print(events.table(sort_by="self_device_time_total", row_limit=14), flush=True)
        print(events.table(sort_by="self_cpu_time_total", row_limit=10), flush=True)
        run.directory.close()
        del wrapped, optimizer, model, prepared
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1])
