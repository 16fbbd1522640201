# One entry point for newcomers and CI. Everything installs from the package registries; nothing else is fetched.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-installed-stamp

.PHONY: install install-test run test lint typecheck unit clean benchmarks

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The pinned CPU build first: an unpinned torch would resolve to a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e '.[frameworks]' torch==$(TORCH_VERSION)
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[frameworks,test]' torch==$(TORCH_VERSION)
	touch $(TEST_STAMP)

install: $(STAMP)

install-test: $(TEST_STAMP)

# The main job: benchmark the built-in default model on every available CPU backend and print the table.
run: $(STAMP)
	$(BIN)/infermeter bench -o results/default.json

lint: $(TEST_STAMP)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

unit: $(TEST_STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck unit

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
