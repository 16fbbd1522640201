"""Every Python example in docs/python-api.md runs, each on its own, as a user would run it: saved as a script
(with no `if __name__ == "__main__"` guard, as a notebook cell would be pasted) and run in a fresh process."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.MULTILINE | re.DOTALL)


def test_the_document_has_an_example_per_command_family() -> None:
    families = ["im.bench(", ".to_pandas()", ".save(", "im.load_results(", ".compare(", ".report("]
    assert all(any(family in block for block in BLOCKS) for family in families), families


@pytest.mark.parametrize("code", BLOCKS, ids=[f"example{i + 1}" for i in range(len(BLOCKS))])
def test_example_runs(code: str, tmp_path: Path) -> None:
    if "to_pandas" in code and importlib.util.find_spec("pandas") is None:
        pytest.skip("pandas is not installed (the example's own subject)")
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), done.stderr[-3000:]
    # Every case ran: a worker that re-ran the script, or any other failure, shows as a status in the output.
    assert not re.search(r"\b(crashed|failed|timeout|unavailable)\b", done.stdout, re.IGNORECASE), done.stdout
