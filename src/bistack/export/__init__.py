"""Export a trained model for machines without PyTorch (``bistack export``), and run what was
exported (``bistack.export.runtime``, which imports no torch)."""
