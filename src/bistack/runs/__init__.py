"""What every training run shares, whatever its kind: the one driver (``driver``), the loop
(``loop``), run directories (staging, locks, the atomic swap: ``rundir``), checkpoints
(``checkpoint``), weight averaging (``averaging``), the model card written into each model
directory (``model_card``), TensorBoard curves (``tensorboard``) and vocabularies."""
