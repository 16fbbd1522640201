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


def advised_case(folder: Path, case_id: str) -> dict[str, Any]:
    """The result of an optimize run in `folder` whose figures the advice used for `case_id`: its re-measured copy
    when it was a finalist (optimize.steps_finalists), else the case itself."""
    results = load_json(folder / "results.json")
    steps = results["optimize"]["steps"]
    finalists = next((s for s in steps if s["key"] == "finalists"), {}).get("details", {})
    copies = dict(zip(finalists.get("originals", []), finalists.get("copies", []), strict=True))
    wanted = copies.get(case_id, case_id)
    found: dict[str, Any] = next(c for c in results["cases"] if c["id"] == wanted)
    return found
