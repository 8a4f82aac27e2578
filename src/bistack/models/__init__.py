"""What the families' networks share, below them: the transformer backbone (loading a local
HuggingFace folder, its states per layer, its fine-tuning) and the files it is kept in
(``backbone``, ``backbone_files``), the frozen backbone's feature cache (``feature_cache``),
the token embedder and the builders of embedders and encoders from config sections
(``embeddings``, ``builders``), precision and train/eval modes (``precision``, ``mode``), the
spelling cache of character encoders (``spelling_cache``), and the modules an exported graph
is traced from (``graphs``). Devices are :mod:`bistack.devices`'."""
