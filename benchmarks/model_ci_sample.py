"""A real `infermeter check` run for docs/model-ci.md's sample summary: the tests' tiny model committed in a fresh
git repository, a working-tree change that makes it tens of times slower, checked against `git:HEAD` with the
default gate settings on onnxruntime, one thread. The summary shows a failing latency gate and passing export and
parity checks.

    python benchmarks/model_ci_sample.py [--quick] [--write-docs]

--quick: short measurements (a smoke run); --write-docs: put the summary into docs/model-ci.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "model-ci.md"
START, END = "<!-- model-ci-sample:start -->", "<!-- model-ci-sample:end -->"
sys.path.insert(0, str(ROOT / "tests"))

from modelci_sources import model_repo  # noqa: E402


def run(quick: bool) -> tuple[str, int, str]:
    """(the command as a user types it, its exit code, the markdown summary it wrote)."""
    with tempfile.TemporaryDirectory(prefix="model-ci-sample-") as folder:
        repo = Path(folder) / "repo"
        model_repo(repo, "slower", "models/tiny.py")
        args = ["check", "models/tiny.py:build", "--baseline", "git:HEAD", "-b", "onnxruntime", "--threads", "1"]
        if quick:
            args += ["--min-time", "0.2", "--max-time", "2", "--rounds", "4"]
        summary = Path(folder) / "summary.md"
        env = {key: value for key, value in os.environ.items() if key != "GITHUB_STEP_SUMMARY"}
        done = subprocess.run(
            [sys.executable, "-m", "infermeter", *args, "--summary", str(summary)], cwd=repo, env=env, text=True
        )
        text = summary.read_text() if summary.is_file() else ""
        # The temporary folder's name changes every run; the reader needs only the paths inside it.
        text = text.replace(str(repo) + os.sep, "")
        return "infermeter " + " ".join(args), done.returncode, text


def write_docs(command: str, code: int, summary: str) -> None:
    """Replace the sample between the markers of docs/model-ci.md."""
    text = DOCS.read_text()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    block = f"{START}\n```console\n$ {command}\n(exit code {code})\n```\n\n{summary.strip()}\n{END}"
    DOCS.write_text(head + block + tail)


def main() -> None:
    """Run the sample check; print its summary, and write it into the docs when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurements (smoke run)")
    parser.add_argument("--write-docs", action="store_true", help="write the summary into docs/model-ci.md")
    options = parser.parse_args()
    command, code, summary = run(options.quick)
    print(summary)
    print(f"exit code {code}")
    if options.write_docs:
        write_docs(command, code, summary)
        print(f"wrote {DOCS}")


if __name__ == "__main__":
    main()
