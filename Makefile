# Set-up and entry points. Every target creates .venv when it is missing;
# torch is installed first and pinned, since on these machines only the 2.13.0
# CPU wheel lies on local disk (any other resolution pulls a multi-GB CUDA build).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,demo]'
	touch $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/bistack demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

test: lint
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .ruff_cache
