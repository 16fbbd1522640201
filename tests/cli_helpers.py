"""Helpers for tests that drive the real CLI. (Not in conftest.py: several test folders have a conftest of
their own, and `from conftest import ...` would find whichever one was imported first.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


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
