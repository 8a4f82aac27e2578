"""One runtime's prediction speed and peak memory, in a process of its own (``make bench``'s
``onnx`` item runs it twice: PyTorch eager on the model directory, onnxruntime on its export).

    python benchmarks/speed_onnx.py eager|onnx DIR --plan PLAN [--quick]

Sentences per second of ``tag_tokens`` (batch, forward, Viterbi, tag strings) on CoNLL-2003 dev
sentences at batch 1 and 32. The onnx run never imports torch, so its peak memory is what a
machine without PyTorch needs. Prints one JSON object: rows and ``peak_rss_mb``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runtime", choices=["eager", "onnx"])
    parser.add_argument("model", type=Path)
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.runtime == "eager":
        from bistack.predictor import load_model

        tagger = load_model(args.model)
    else:
        from bistack.predictor import open_model

        tagger = open_model(args.model).model
    sentences = json.loads(args.plan.read_text(encoding="utf-8"))["predict_tokens"]
    rows = []
    for batch_size in (1, 32):
        chosen = sentences[: (200 if args.quick else 1000) if batch_size == 1 else None]
        tagger.tag_tokens(chosen[:64], batch_size=batch_size)  # warm-up
        times = []
        for _ in range(1 if args.quick else 3):
            start = time.perf_counter()
            tagger.tag_tokens(chosen, batch_size=batch_size)
            times.append(time.perf_counter() - start)
        rows.append(
            {
                "item": f"{args.runtime}-{batch_size}",
                "what": f"prediction with {args.runtime}, batch {batch_size}",
                "sentences": len(chosen),
                "sentences_per_s": len(chosen) / statistics.median(times),
            }
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    torch_loaded = "torch" in sys.modules
    json.dump({"rows": rows, "peak_rss_mb": peak, "torch_loaded": torch_loaded}, sys.stdout)


if __name__ == "__main__":
    main()
