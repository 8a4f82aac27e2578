#!/usr/bin/env bash
# On a lent CUDA machine, after benchmarks/gpu_prepare.sh here: installs the wheels its image
# lacks, makes random-weight encoders of MiniLM's and BERT-large's shapes, runs the suite's
# device checks (decoding on the device, pinned copies, host reads) and then every row of
# benchmarks/gpu.py, the train.compile row first in a step of its own, each step under a
# timeout. compile.{md,json} and gpu.{md,json} land in $OUT (the device tool's; runs/gpu-run
# elsewhere), and every step's log in $OUT/logs as it is written: a call killed at the device
# tool's limit still brings back what ran. The step timeouts sum to 530 s and the steps share one
# budget (BUDGET seconds, 540 by default: under the tool's 600 s a call), each step's timeout
# cut to what is left of it, so no step can outlive the call; each group of rows is built,
# measured and freed alone, a failing one recorded with its error. About 5 minutes on an H100
# by estimate (not yet measured): a second identical call fits the 15 minutes.
#   bash benchmarks/gpu_run.sh
# A smoke run on the CPU, small: PYTHON=.venv/bin/python DEVICE=cpu LIMIT=200 \
#   LARGE_SHAPE="64 2 2" LARGE_TEXTS=8 LARGE_LENGTH=16 bash benchmarks/gpu_run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-runs/gpu-run}
mkdir -p "$OUT"
site=$(mktemp -d)
logs=$OUT/logs
mkdir -p "$logs"
budget=${BUDGET:-540}
step() {  # step NAME SECONDS COMMAND...: its output in NAME.log, its end in steps.log
    local name=$1 seconds=$2
    shift 2
    local started=$SECONDS left=$((budget - SECONDS))
    if ((left < 10)); then
        echo "$name: not run, the budget of $budget s is spent" | tee -a "$logs/steps.log"
        return
    fi
    ((seconds > left)) && seconds=$left
    timeout "$seconds" "$@" > "$logs/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - started)) s (limit $seconds s)" | tee -a "$logs/steps.log"
}
# The image's pytest plugins are not this project's: none is loaded into the device checks.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
step install 60 "$PYTHON" -m pip install -q --no-index --no-deps --target "$site" .dev/whl/*.whl
export PYTHONPATH=$site:$PWD/src:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
step device 20 "$PYTHON" -c "import torch; print(torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))"
step minilm 40 "$PYTHON" .dev/make_backbone.py .dev/minilm "$site/minilm"
# shellcheck disable=SC2086  # the shape is three numbers
step large 60 "$PYTHON" .dev/make_backbone.py .dev/minilm "$site/large" ${LARGE_SHAPE:-1024 24 16}
rows=(--train .dev/data/train.txt --limit "${LIMIT:-2000}" --backbone "$site/minilm"
      --large "$site/large" --large-texts "${LARGE_TEXTS:-256}" --large-length "${LARGE_LENGTH:-128}"
      --device "${DEVICE:-cuda}" --out "$OUT")
# The compile row first, in a step of its own: the most uncertain (minutes of compiling), it
# cannot eat the other rows' time, and a failure there is recorded in compile.json.
step compile 90 "$PYTHON" benchmarks/gpu.py "${rows[@]}" --compile --rows finetune-b16-bf16-mixed-compiled --name compile
step checks 60 "$PYTHON" -m pytest -q -p no:cacheprovider tests/taggers/test_device_decoding.py \
    tests/devices/test_transfer.py tests/runs/test_host_reads.py
step gpu 200 "$PYTHON" benchmarks/gpu.py "${rows[@]}"
