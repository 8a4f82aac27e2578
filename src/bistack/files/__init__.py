"""What bistack reads and writes on disk, torch-free: model directories (config and vocabulary
JSON, safetensors weights, atomic writes and folder swaps: ``modeldir``), an ensemble's
directory of member models (``ensemble_dir``: what ``bistack cv`` writes and every outlet opens),
exported directories and their onnxruntime sessions (``onnx_session``), the JSON lines every
kind's predictions are written as (``formats``), folders a command may claim (``paths``) and
digests of data files (``fingerprints``)."""
