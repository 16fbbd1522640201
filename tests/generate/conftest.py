"""Fixtures of the generation tests: the helper modules of this folder, and the tiny offline Llama."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# Appended, not prepended: `from conftest import run_cli` must still find tests/conftest.py first.
sys.path.append(str(Path(__file__).parent))

needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python is not installed (optional `llm` extra; `make test-llm` installs it and runs these)",
)
needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("tokenizers") is None,
    reason="transformers/tokenizers are not installed (optional `llm` extra; `make test-llm` installs them)",
)


@pytest.fixture(scope="session")
def tiny_folder() -> Path:
    """The tiny Llama HF folder (built once per test session into the test cache)."""
    from infermeter.generate.models import tiny_llama_folder

    return tiny_llama_folder()
