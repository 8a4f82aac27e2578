"""What bistack reads and writes on disk, torch-free: model directories (config and vocabulary
JSON, safetensors weights, atomic writes: ``modeldir``), exported directories and their
onnxruntime sessions (``onnx_session``), the output formats of predictions (``formats``),
folders a command may claim (``paths``) and digests of data files (``fingerprints``)."""
