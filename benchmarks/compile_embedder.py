"""Does ``torch.compile`` on the non-recurrent part of a CoNLL training step pay? (issue:
performance round two). The token embedder (word and casing lookups, the char encoder, the
concatenation) is compiled with ``dynamic=True`` and trained beside an eager copy, batch by
batch on the same bucketed batches, one thread; the fused word LSTM is left alone.

    .venv/bin/python benchmarks/compile_embedder.py

Prints eager and compiled ms per step for the char BiLSTM and the char CNN. Measured
(2026-12-02, beside other work): char BiLSTM 99.1 ms eager, 104.9 compiled (the LSTM inside
breaks the graph); char CNN 83.3 eager, 575.2 compiled (every new word width recompiles until
dynamo's limit). Not kept.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import torch

from bistack.data.batching import collate_tagging
from bistack.runs.optimizers import build_optimizer
from speed import make_plan
from speed_items import CHAR_CNN, build_from_plan


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "plan.json"
        make_plan(path)
        plan = json.loads(path.read_text())
    batches = plan["bucketed_batches"][:40]
    for name, extra in [("char BiLSTM", []), ("char CNN", CHAR_CNN)]:
        runs = []
        for compiled in (False, True):
            config, model, vocabularies, encoded = build_from_plan(plan, extra)
            if compiled:
                model.embedder = torch.compile(model.embedder, dynamic=True)
            runs.append((model, vocabularies, encoded, build_optimizer(config.optimizer, model)))

        def step(model, vocabularies, encoded, optimizer, indices) -> float:
            start = time.perf_counter()
            model(collate_tagging([encoded[i] for i in indices], vocabularies)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return time.perf_counter() - start

        for indices in batches[:8]:  # warm-up, and the compilations
            step(*runs[1], indices)
        eager = [step(*runs[0], i) for i in batches[8:]]
        compiled = [step(*runs[1], i) for i in batches[8:]]
        print(
            f"{name}: eager {1000 * sum(eager) / len(eager):.1f} ms a step, compiled "
            f"{1000 * sum(compiled) / len(compiled):.1f} ms"
        )


if __name__ == "__main__":
    main()
