"""Export a trained model for machines without PyTorch (``bistack export``), and run what was
exported (``bistack.onnx_session``, which imports no torch)."""
