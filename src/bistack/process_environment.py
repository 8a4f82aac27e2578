"""The environment every process that runs a model starts with: the command line applies it
(``bistack.cli.main``, each value only where the user has not set it), and the Ray Serve
deployment gives it to replicas on machines the command line never ran on.

- Nothing is downloaded at run time, and transformers' warnings and bars are not ours.
- oneDNN caches a compiled kernel per tensor shape, up to 1,024 of them, and a corpus's batches
  come in ever new shapes: the cache grew RSS by 30 MB over 60k lines. 16 entries keep memory
  flat at the same speed (CoNLL dev x3: 9.2 s either way). It is read once, when torch first
  runs a oneDNN kernel, so it must be set before torch is imported.
"""

from __future__ import annotations

MODEL_PROCESS_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "16",
}
