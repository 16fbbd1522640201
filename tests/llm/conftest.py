"""Fixtures of the generation tests: the helper modules of this folder, and the tiny offline Llama."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Appended, not prepended: `from cli_helpers import run_cli` must still find tests/cli_helpers.py first.
sys.path.append(str(Path(__file__).parent))


@pytest.fixture(scope="session")
def tiny_folder() -> Path:
    """The tiny Llama HF folder (built once per test session into the test cache)."""
    from infermeter.llm.models import tiny_llama_folder

    return tiny_llama_folder()
