"""Helpers for tests that drive the real CLI. (Not in conftest.py: several test folders have a conftest of
their own, and `from conftest import ...` would find whichever one was imported first.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
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


@dataclass(frozen=True)
class MainRun:
    """What `run_main` captured: the exit code and the output, named as in `run_cli`'s CompletedProcess."""

    returncode: int
    stdout: str
    stderr: str


def run_main(*args: str) -> MainRun:
    """The CLI's entry point (`cli.app.main`, what `python -m infermeter` runs) in this process, its output and exit
    code captured as `run_cli` gives them, without the seconds a fresh interpreter spends importing: for refusals,
    and for commands judged by their output and files. What needs a process of its own (signals, a clean
    environment, a user's first run) and at least one run of each command stay with `run_cli`. The SIGINT handler
    and unraisable hook that `main` installs are put back."""
    import contextlib
    import io
    import signal

    from infermeter.cli.app import main

    stdout, stderr = io.StringIO(), io.StringIO()
    handler, hook = signal.getsignal(signal.SIGINT), sys.unraisablehook
    code: int | str | None = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main(list(args))
    except SystemExit as exc:
        code = exc.code
    finally:
        signal.signal(signal.SIGINT, handler)
        sys.unraisablehook = hook
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return MainRun(returncode, stdout.getvalue(), stderr.getvalue())


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
