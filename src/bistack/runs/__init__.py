"""What every training run shares, whatever its kind: the one driver, the loop, run
directories (staging, locks, the atomic swap), checkpoints, and vocabularies."""
