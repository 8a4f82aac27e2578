#!/usr/bin/env bash
# The first seed's build order measured on real data (issue: the ladder), 3 seeds per rung:
#   OMP_NUM_THREADS=1 bash benchmarks/ladder.sh [sst2|conll03]
# Cost on one core of the standard machine: SST-2 about 12 min a run (15 runs, ~3 h);
# CoNLL-2003 about 40 min a run at 40 epochs (15 runs, ~10 h): run the two on separate cores.
# Finished runs are reused, so an interrupted ladder resumes. Tables go to benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
case "${1:-sst2}" in
  sst2) config=configs/sst2-bilstm-attention.yaml ;;
  conll03) config=configs/conll03-bilstm-crf.yaml ;;
  *) echo "usage: $0 [sst2|conll03]" >&2; exit 2 ;;
esac
out="runs/benchmarks/ladder-$1"
.venv/bin/bistack ladder "$config" --seeds 3 --output "$out"
mkdir -p benchmarks/results
for ext in md json png; do cp "$out/ladder.$ext" "benchmarks/results/ladder-$1.$ext"; done
