#!/usr/bin/env bash
# On a machine with a CUDA GPU: one epoch of the CoNLL-2003 config trained on the GPU, then
# evaluate and predict there. Prints what it ran; exits 0 with a note when no GPU is present.
#   bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"
then
    echo "no CUDA device here: nothing to check"
    exit 0
fi
.venv/bin/python -c "import torch; print('device:', torch.cuda.get_device_name(0))"
out=runs/gpu-check
export HF_HUB_OFFLINE=1
.venv/bin/bistack train configs/conll03-bilstm-crf.yaml --accelerator cuda \
    --set train.max_epochs=1 --output "$out" --overwrite --no-progress
.venv/bin/bistack evaluate "$out/model" ../shared/data/conll2003/dev.txt --device cuda
.venv/bin/bistack predict "$out/model" "Washington signed the treaty in 1796." \
    --device cuda --format jsonl --top-k 2
