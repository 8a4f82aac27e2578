"""Export a trained model for machines without PyTorch (``bistack export``), and run what was
exported (``bistack.files.onnx_session``, which imports no torch)."""
