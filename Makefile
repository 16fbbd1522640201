# One entry point for newcomers and CI. Everything installs from the package registries; nothing else is fetched.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-installed-stamp

.PHONY: install install-test run test lint typecheck unit clean benchmarks browser

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

unit: $(TEST_STAMP) browser
	$(BIN)/python -m pytest -q

test: lint typecheck unit

# Debian's chromium for the HTML report test (the browser test skips, saying why, where it cannot be installed).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing and cannot be installed here (needs root and apt-get): the browser test will skip"; fi; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
