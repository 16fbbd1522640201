"""Shared fixtures. Every test run uses its own converted-model cache so that tests never touch the user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

# Set at import time so that spawned worker processes inherit it too.
_CACHE = Path(tempfile.mkdtemp(prefix="infermeter-test-cache-"))
os.environ.setdefault("INFERMETER_CACHE_DIR", str(_CACHE))
os.environ.setdefault("INFERMETER_HISTORY", "off")


@pytest.fixture
def cache_dir() -> Path:
    """The converted-model cache of this test session."""
    return Path(os.environ["INFERMETER_CACHE_DIR"])


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `infermeter` CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "infermeter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def load_json(path: Path) -> Any:
    """A JSON file's content."""
    return json.loads(path.read_text())
