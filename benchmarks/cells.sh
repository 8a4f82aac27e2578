#!/usr/bin/env bash
# The parallel-scan cells' accuracy against the LSTM (issue: performance round two), 3 seeds each:
#   OMP_NUM_THREADS=1 bash benchmarks/cells.sh conll03|sst2 [CELL ...]
# CELL: lstm, mingru, minlstm (all by default), each with 1, 2 and 3 layers, on the shipped
# config (CoNLL-2003 BiLSTM-CRF; SST-2 BiLSTM + attention) at a fixed epoch budget, as the
# ladder's tables are (EPOCHS: 5 for CoNLL-2003, 3 for SST-2), so every cell gets the same
# number of passes over the data. Runs go to runs/benchmarks/cells-DATA/CELL-LAYERSl-seedN; a
# finished run is reused. The table: .venv/bin/python benchmarks/cells_report.py DATA.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
data="${1:-}"; shift || true
case "$data" in
  conll03) config=configs/conll03-bilstm-crf.yaml; epochs="${EPOCHS:-5}" ;;
  sst2) config=configs/sst2-bilstm-attention.yaml; epochs="${EPOCHS:-3}" ;;
  *) echo "usage: $0 conll03|sst2 [CELL ...]" >&2; exit 2 ;;
esac
cells=("$@"); [[ ${#cells[@]} -gt 0 ]] || cells=(lstm mingru minlstm)
for seed in 1 2 3; do
  for layers in 1 2 3; do
    for cell in "${cells[@]}"; do
      out="runs/benchmarks/cells-$data/$cell-${layers}l-seed$seed"
      if [[ -f "$out/metrics.csv" && -f "$out/model/model.safetensors" && ! -f "$out/checkpoint.safetensors" ]]; then
        echo "$out: finished"; continue
      fi
      resume=(); [[ -f "$out/checkpoint.safetensors" ]] && resume=(--resume)
      mkdir -p "$(dirname "$out")"
      .venv/bin/bistack train "$config" --output "$out" --no-progress --threads "$OMP_NUM_THREADS" \
        --set "encoder.cell=$cell" --set "encoder.num_layers=$layers" \
        --set "train.max_epochs=$epochs" --set "train.seed=$seed" "${resume[@]}" \
        >> "$out.log" 2>&1
      echo "$out: $(tail -n 1 "$out.log")"
    done
  done
done
