#!/usr/bin/env bash
# Pooling over all-MiniLM-L6-v2's layers (issue: second seed). Every command reuses finished
# runs and the feature cache, so rerunning after an interruption resumes. One core each:
#   OMP_NUM_THREADS=1 bash benchmarks/layer_pooling.sh [frozen|finetune|finetune-sst2|finetune-commonlit|
#     finetune-commonlit-so-far|conll]
# Results are copied to benchmarks/results/layer_pooling/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
BISTACK=.venv/bin/bistack
RESULTS=benchmarks/results/layer_pooling
mkdir -p "$RESULTS"

keep() {  # keep() RUN_DIR NAME: copy a comparison's table, JSON and chart into the results
  for ext in md json png; do cp "$1/compare-poolers.$ext" "$RESULTS/$2.$ext"; done
}

case "${1:-frozen}" in
  frozen)
    $BISTACK compare-poolers configs/commonlit-minilm-layers.yaml --folds 5 --vectors cls,mean \
      --output runs/benchmarks/compare-commonlit
    keep runs/benchmarks/compare-commonlit commonlit-frozen
    $BISTACK compare-poolers configs/sst2-minilm-layers.yaml --seeds 3 --vectors cls,mean \
      --output runs/benchmarks/compare-sst2
    keep runs/benchmarks/compare-sst2 sst2-frozen
    ;;
  finetune-commonlit|finetune-commonlit-so-far|finetune-sst2|finetune)
    # The best two frozen poolers and mean pooling, the backbone fine-tuned (lr 5e-5, head 1e-3
    # or the config's; 10% warm-up then linear decay; clipping 1.0). finetune-commonlit-so-far
    # trains nothing: it tabulates the CommonLit runs finished so far (the full run takes about
    # 10 CPU-hours, so it spans sessions; processes with disjoint POOLERS, or disjoint RUNS such
    # as RUNS="fold3 fold4", can share it: each writes the table of the runs finished so far).
    POOLERS="${POOLERS:-lstm,weighted,mean}"
    SHARED=()
    if [[ -n "${RUNS:-}" ]]; then read -ra SHARED <<< "--runs $RUNS"; fi
    TUNE=(--poolers "$POOLERS" --vectors mean --set backbone.finetune=true --set backbone.lr=5e-5
          --set optimizer.warmup_fraction=0.1)
    COMMONLIT=(configs/commonlit-minilm-layers.yaml --folds 5 "${TUNE[@]}"
               --set train.max_epochs=3 --set train.patience=1 --set train.batch_size=16
               --set backbone.max_length=256 --set backbone.long_texts=truncate
               --output runs/benchmarks/finetune-commonlit)
    if [[ "$1" == finetune-commonlit-so-far ]]; then
      $BISTACK compare-poolers "${COMMONLIT[@]}" --finished-only
      keep runs/benchmarks/finetune-commonlit commonlit-finetuned-so-far
      exit 0
    fi
    if [[ "$1" != finetune-sst2 && -n "${RUNS:-}" ]]; then
      $BISTACK compare-poolers "${COMMONLIT[@]}" "${SHARED[@]}"
      keep runs/benchmarks/finetune-commonlit commonlit-finetuned-so-far
    elif [[ "$1" != finetune-sst2 ]]; then
      $BISTACK compare-poolers "${COMMONLIT[@]}"
      keep runs/benchmarks/finetune-commonlit commonlit-finetuned
    fi
    if [[ "$1" != finetune-commonlit ]]; then
      $BISTACK compare-poolers configs/sst2-minilm-layers.yaml --seeds 1 "${TUNE[@]}" \
        --set train.max_epochs=1 --set train.batch_size=32 \
        --output runs/benchmarks/finetune-sst2
      keep runs/benchmarks/finetune-sst2 sst2-finetuned
    fi
    ;;
  conll)
    $BISTACK train configs/conll03-minilm-layers-crf.yaml --no-progress \
      --output runs/benchmarks/conll03-minilm
    cp runs/benchmarks/conll03-minilm/metrics.csv "$RESULTS/conll03-minilm-metrics.csv"
    ;;
esac
