#!/usr/bin/env bash
# The base-size encoder (all-mpnet-base-v2, `make backbones` first) where its users compare:
# each recipe is its MiniLM recipe with only the backbone and its precision changed.
#   OMP_NUM_THREADS=1 bash benchmarks/base_size.sh conll03|conll03-top2|commonlit|commonlit-top2|commonlit-top4|commonlit-blend|sst2|sst2-top2
# conll03: the stacked tagger (configs/conll03-stacked-mpnet-crf.yaml), seeds 1-3, dev F1 beside
#   MiniLM's (benchmarks/results/stacked-conll03.md); the first run builds the cache and its
#   line gives the time (runs/benchmarks/base-size/conll03-seed1/train.log); the table:
#   benchmarks/base_size_report.py (results/base-size/conll03.md).
# conll03-top2: the same tagger with its top 2 layers trained (configs/conll03-stacked-mpnet-top2
#   .yaml), seeds 1 to SEEDS (3 unless set) over one cache of the frozen bottom, the first
#   seed's log giving that pass's time; tabulated on the same page.
# commonlit: the seed's comparison at base size, each pooler a 5-fold `bistack cv --inner-dev`
#   over the layers' means on the same folds, then their blend (compare-poolers --blend).
# commonlit-top2, commonlit-top4: the LSTM over the layers' means with the top 2 or 4 layers
#   trained (configs/commonlit-mpnet-top2.yaml, -top4.yaml), a 5-fold `bistack cv --inner-dev`
#   on the same folds.
# commonlit-blend: after both, the blend of the frozen poolers' CVs and the top-K runs.
# sst2: the layer classifier's dev accuracy, 3 seeds; sst2-top2: with its top 2 layers trained.
# Every run is reused when finished and resumes when killed; each keeps its train.log, whose
# lines give the backbone pass's and the training's times. Tables: benchmarks/results/base-size/.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
BISTACK=.venv/bin/bistack
RUNS=runs/benchmarks/base-size
RESULTS=benchmarks/results/base-size
mkdir -p "$RESULTS"
case "${1:-}" in
  conll03)
    for seed in 1 2 3; do
      out=$RUNS/conll03-seed$seed
      if [[ -f $out/model/README.md && ! -f $out/checkpoint.safetensors ]]; then continue; fi
      again=(--overwrite); [[ -f $out/checkpoint.safetensors ]] && again=(--resume)
      $BISTACK train configs/conll03-stacked-mpnet-crf.yaml --set train.seed=$seed --no-progress \
        --output "$out" "${again[@]}"
    done
    .venv/bin/python benchmarks/base_size_report.py
    ;;
  conll03-top2)
    for seed in $(seq 1 "${SEEDS:-3}"); do
      out=$RUNS/conll03-top2-seed$seed
      if [[ -f $out/model/README.md && ! -f $out/checkpoint.safetensors ]]; then continue; fi
      again=(--overwrite); [[ -f $out/checkpoint.safetensors ]] && again=(--resume)
      $BISTACK train configs/conll03-stacked-mpnet-top2.yaml --set train.seed=$seed \
        --no-progress --output "$out" "${again[@]}"
    done
    .venv/bin/python benchmarks/base_size_report.py
    ;;
  commonlit)
    $BISTACK compare-poolers configs/commonlit-mpnet-layers.yaml --folds 5 --blend \
      --poolers lstm,gru,attention,weighted,mean,cls --output $RUNS/compare-commonlit --no-progress
    for ext in json png; do cp "$RUNS/compare-commonlit/compare-poolers.$ext" "$RESULTS/commonlit.$ext"; done
    cp "$RUNS/compare-commonlit/blend/blend.json" "$RESULTS/commonlit-blend.json"
    .venv/bin/python benchmarks/base_size_pages.py  # the pages, from their JSON
    ;;
  commonlit-top2|commonlit-top4)
    # The LSTM over the layers' means with the top K layers trained: one `bistack cv
    # --inner-dev` on the frozen table's folds (the same table, split seed and splitter).
    top=${1#commonlit-}
    out=$RUNS/commonlit-$top-lstm
    $BISTACK cv configs/commonlit-mpnet-$top.yaml --folds 5 --inner-dev --no-progress \
      --output "$out"
    .venv/bin/python benchmarks/cv_record.py "$out" "$RESULTS/commonlit-$top.json"
    .venv/bin/python benchmarks/base_size_pages.py  # the pages, from their JSON
    ;;
  commonlit-blend)
    # The frozen table's six poolers and the top-2 and top-4 runs (all on the same folds),
    # blended on their out-of-fold predictions; the frozen CVs are run where missing.
    for top in top2 top4; do
      [[ -f $RUNS/commonlit-$top-lstm/cv.json ]] || {
        echo "base_size.sh commonlit-$top first: its CV is not finished" >&2; exit 2; }
    done
    bash benchmarks/base_size.sh commonlit  # the frozen table and its blend, reused if finished
    frozen=(lstm-mean gru-mean attention-mean weighted-mean mean cls)
    $BISTACK blend "${frozen[@]/#/$RUNS/compare-commonlit/}" $RUNS/commonlit-top2-lstm \
      $RUNS/commonlit-top4-lstm --output $RUNS/commonlit-blend-frozen-and-top --overwrite
    cp $RUNS/commonlit-blend-frozen-and-top/blend.json "$RESULTS/commonlit-top-blend.json"
    .venv/bin/python benchmarks/base_size_pages.py  # the pages, from their JSON
    ;;
  sst2)
    $BISTACK compare-poolers configs/sst2-mpnet-layers.yaml --seeds 3 --poolers lstm \
      --output $RUNS/compare-sst2 --no-progress
    for ext in json png; do cp "$RUNS/compare-sst2/compare-poolers.$ext" "$RESULTS/sst2.$ext"; done
    .venv/bin/python benchmarks/base_size_pages.py  # the pages, from their JSON
    ;;
  sst2-top2)
    # The same classifier with the top 2 layers trained (configs/sst2-mpnet-top2.yaml), 3
    # seeds over one cache of the frozen bottom; ONLY="seed1" trains that seed alone, then
    # tabulates the finished ones.
    only=(); [[ -n ${ONLY:-} ]] && only=(--runs $ONLY)
    $BISTACK compare-poolers configs/sst2-mpnet-top2.yaml --seeds 3 --poolers lstm \
      --output $RUNS/compare-sst2-top2 --no-progress "${only[@]}"
    cp "$RUNS/compare-sst2-top2/compare-poolers.json" "$RESULTS/sst2-top2.json"
    .venv/bin/python benchmarks/base_size_pages.py  # the pages, from their JSON
    ;;
  *) echo "usage: bash benchmarks/base_size.sh conll03|conll03-top2|commonlit|commonlit-top2|commonlit-top4|commonlit-blend|sst2|sst2-top2" >&2; exit 2 ;;
esac
