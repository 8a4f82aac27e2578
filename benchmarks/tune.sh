#!/usr/bin/env bash
# bistack tune on a background budget: the CoNLL-2003 BiLSTM-CRF and the SST-2 classifier, each
# trial capped at a few epochs to rank configs cheaply; the verdict then retrains the starting
# (shipped) config and the best trial's with the shipped epoch budget and early stopping
# (--verdict-set), 3 seeds each, so the winner is judged as it would be trained.
# Results: benchmarks/results/tune-*/.
#   OMP_NUM_THREADS=1 bash benchmarks/tune.sh conll03   (about 100 minutes on one thread)
#   OMP_NUM_THREADS=1 bash benchmarks/tune.sh sst2      (about 50 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:?conll03 or sst2}" in
  conll03)
    config=configs/conll03-bilstm-crf.yaml space=configs/spaces/conll03-bilstm-crf.yaml
    budget=(--trials 12 --startup-trials 4 --set train.max_epochs=5 --set train.patience=5
            --verdict-set train.max_epochs=40 --verdict-set train.patience=8) ;;
  sst2)
    config=configs/sst2-bilstm-attention.yaml space=configs/spaces/sst2-bilstm-attention.yaml
    budget=(--trials 10 --startup-trials 4 --set train.max_epochs=3 --set train.patience=3
            --verdict-set train.max_epochs=14 --verdict-set train.patience=4) ;;
  *) echo "usage: $0 conll03|sst2" >&2; exit 2 ;;
esac
output=runs/benchmarks/tune-$1
.venv/bin/bistack tune "$config" --space "$space" "${budget[@]}" --seeds 3 --sampler-seed 1 \
  --threads "${OMP_NUM_THREADS:-1}" --output "$output"
mkdir -p "benchmarks/results/tune-$1"
cp "$output"/tune.md "$output"/tune.json "$output"/tune-*.png "$output"/best.yaml \
  "benchmarks/results/tune-$1/"
