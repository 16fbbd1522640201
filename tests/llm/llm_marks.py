"""Skip marks of the generation tests (llama-cpp-python and transformers are optional: the `llm` extra)."""

from __future__ import annotations

import importlib.util

import pytest

needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python is not installed (optional `llm` extra; `make test-llm` installs it and runs these)",
)
needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("tokenizers") is None,
    reason="transformers/tokenizers are not installed (optional `llm` extra; `make test-llm` installs them)",
)
