"""A tagger exported for onnxruntime: the plan ``bistack export`` follows, the traceable graph,
and the torch-free runtime that predicts from the exported directory."""
