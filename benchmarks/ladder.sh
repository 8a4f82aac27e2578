#!/usr/bin/env bash
# The first seed's build order measured on real data (issue: the ladder), 3 seeds per rung:
#   OMP_NUM_THREADS=1 bash benchmarks/ladder.sh sst2|conll03 [EPOCHS]
# Every rung gets the same epoch budget (EPOCHS; default: the config's max_epochs with early
# stopping). Cost of one epoch of all five rungs x 3 seeds on one core of the standard machine:
# SST-2 about 30 min, CoNLL-2003 about 20 min. The committed tables used 3 (SST-2) and 5
# (CoNLL-2003) epochs, so they fit one working session on two cores; run the two on separate cores.
# Finished runs are reused, so an interrupted ladder resumes. Tables go to benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
case "${1:-}" in
  sst2) config=configs/sst2-bilstm-attention.yaml ;;
  conll03) config=configs/conll03-bilstm-crf.yaml ;;
  *) echo "usage: $0 sst2|conll03 [EPOCHS]" >&2; exit 2 ;;
esac
budget=()
out="runs/benchmarks/ladder-$1"
if [[ -n "${2:-}" ]]; then
  budget=(--set "train.max_epochs=$2")
  out="$out-$2ep"
fi
.venv/bin/bistack ladder "$config" --seeds 3 --output "$out" "${budget[@]}"
mkdir -p benchmarks/results
for ext in md json png; do cp "$out/ladder.$ext" "benchmarks/results/ladder-$1.$ext"; done
