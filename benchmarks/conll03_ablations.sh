#!/usr/bin/env bash
# CoNLL-2003 dev F1 of the BiLSTM-CRF and three one-change ablations (uni vs bi, softmax vs CRF,
# with vs without characters). The full model trains for 40 epochs, the ablations for 30; the
# table compares every run at the 30-epoch budget (about 30-45 minutes a run on one core).
# Run from the repository root:  bash benchmarks/conll03_ablations.sh [RUNS_DIR]
set -euo pipefail
runs=${1:-runs/conll03}
config=configs/conll03-bilstm-crf.yaml
train() { OMP_NUM_THREADS=1 .venv/bin/bistack train "$config" --no-progress --output "$runs/$1" "${@:2}"; }
train bilstm-crf &
train uni-lstm-crf --set encoder.bidirectional=false &
wait
train bilstm-softmax --set head.type=softmax --set train.max_epochs=30 &
train bilstm-crf-no-chars --set features.char_encoder=none --set train.max_epochs=30 &
wait
.venv/bin/python benchmarks/summarise_runs.py --max-epoch 30 \
  "BiLSTM-CRF=$runs/bilstm-crf" "unidirectional=$runs/uni-lstm-crf" \
  "softmax head=$runs/bilstm-softmax" "no characters=$runs/bilstm-crf-no-chars"
