#!/usr/bin/env bash
# One CoNLL-2003 epoch (training and dev scoring) of configs/conll03-bilstm-crf.yaml in 32-bit and
# in bf16-mixed precision, twice each, alternating; prints each run's epoch line.
#   bash benchmarks/precision.sh        (results: benchmarks/results/precision.md)
set -euo pipefail
cd "$(dirname "$0")/.."
for precision in 32-true bf16-mixed 32-true bf16-mixed; do
  HF_HUB_OFFLINE=1 .venv/bin/bistack train configs/conll03-bilstm-crf.yaml \
    --output "runs/precision-$precision" --overwrite --no-progress --precision "$precision" \
    --set train.max_epochs=1 2>&1 | grep "^epoch 1" | sed "s/^/$precision: /"
done
