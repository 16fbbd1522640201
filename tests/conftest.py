"""Shared fixtures. Every test run uses its own converted-model cache so that tests never touch the user's."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Set at import time so that spawned worker processes inherit it too.
_CACHE = Path(tempfile.mkdtemp(prefix="infermeter-test-cache-"))
os.environ.setdefault("INFERMETER_CACHE_DIR", str(_CACHE))
os.environ.setdefault("INFERMETER_HISTORY", "off")


@pytest.fixture
def cache_dir() -> Path:
    """The converted-model cache of this test session."""
    return Path(os.environ["INFERMETER_CACHE_DIR"])
