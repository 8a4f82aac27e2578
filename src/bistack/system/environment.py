"""The environment every process that runs a model starts with: the command line applies it
(``bistack.cli.main``, each value only where the user has not set it), and the Ray Serve
deployment gives it to replicas on machines the command line never ran on.

- Nothing is downloaded at run time, and transformers' warnings and bars are not ours.
- oneDNN caches a compiled kernel per tensor shape, up to 1,024 of them, and a corpus's batches
  come in ever new shapes: the cache grew RSS by 30 MB over 60k lines. 256 entries keep memory
  flat (``bistack predict`` of 2,000 and of 30,000 lines: the same peak RSS) at full speed. 16,
  the earlier cap, did so for batches too (CoNLL dev x3: 9.2 s either way) but not for one
  sentence at a time, as a server runs them: a lone sentence took 3.6-4.1 ms against 1.8-2.4 ms
  uncapped or at 256, rebuilding kernels for lengths it had just seen. The price: a serving
  worker's peak RSS, 565 MB against 458 MB at 16 (benchmarks/results/serve-load.md). It is
  read once, when torch first runs a oneDNN kernel, so it must be set before torch is imported.
"""

from __future__ import annotations

MODEL_PROCESS_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "256",
}
