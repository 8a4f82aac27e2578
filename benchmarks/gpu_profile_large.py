"""Where a fine-tuning step of a large encoder spends its time, float32 (TF32) and bf16-mixed.

A layer classifier (BiLSTM over the layers' CLS vectors) over a BERT-large-shaped encoder
(``../shared/gpu/make_backbone.py SRC DST 1024 24 16``), fine-tuned at 256 subwords, batch 16:
three of the training loop's steps under the profiler after a warm-up epoch, the operators by
device time and by host time. Device time far under host time means the step waits on Python
and kernel launches, not on the GPU.

  python benchmarks/gpu_profile_large.py LARGE_DIR      prints the tables
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from gpu import fine_tuning, synthetic_table  # benchmarks/gpu.py, beside this file


def main(large: str) -> None:
    torch.set_float32_matmul_precision("high")
    device = torch.device("cuda")
    work = Path(tempfile.mkdtemp())
    table = synthetic_table(large, 96, work)
    for precision in (None, "bf16-mixed"):
        tuning = fine_tuning(large, table, device, precision, work)
        tuning.epoch(1)  # warm-up
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiled:
            tuning.epoch(1, limit=3)
            torch.cuda.synchronize()
        events = profiled.key_averages()
        print(f"===== {precision or 'float32 (TF32 matmuls)'}", flush=True)
        print(events.table(sort_by="self_device_time_total", row_limit=14), flush=True)
        print(events.table(sort_by="self_cpu_time_total", row_limit=10), flush=True)
        tuning.run.directory.close()
        del tuning
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1])
