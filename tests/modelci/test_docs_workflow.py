"""The GitHub Actions workflow of docs/model-ci.md, run as far as it can be without GitHub: its pyproject table and
its `infermeter check` step as written, in a git repository with the model and an `origin/main`, with
GITHUB_STEP_SUMMARY set. Only shorter measurement flags are appended."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelci_sources import git, model_repo, worktrees

DOC = Path(__file__).resolve().parents[2] / "docs" / "model-ci.md"
FAST = ["--min-time", "0.2", "--max-time", "2", "--rounds", "4", "--threads", "1", "--samples", "2"]


def _block(language: str, containing: str) -> str:
    for body in re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S):
        if containing in body:
            return str(body)
    raise AssertionError(f"docs/model-ci.md has no ```{language} block with {containing!r}")


def _check_step(workflow: dict[str, Any]) -> str:
    steps = workflow["jobs"]["check"]["steps"]
    runs = [step["run"] for step in steps if "infermeter check" in step.get("run", "")]
    assert len(runs) == 1
    return str(runs[0])


def test_workflow_is_valid_and_keeps_the_baseline_in_the_clone() -> None:
    workflow = yaml.safe_load(_block("yaml", "infermeter check"))
    steps = workflow["jobs"]["check"]["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@") and steps[0]["with"]["fetch-depth"] == 0
    assert "git:origin/${{ github.base_ref }}" in _check_step(workflow)
    assert any(step.get("if") == "always()" and "upload-artifact" in step.get("uses", "") for step in steps)


@pytest.mark.slow
def test_workflow_step_runs_and_writes_the_step_summary(tmp_path: Path) -> None:
    table = tomllib.loads(_block("toml", "[tool.infermeter.check]"))["tool"]["infermeter"]["check"]
    repo = tmp_path / "repo"
    model_path = table["model"].rpartition(":")[0]
    model_repo(repo, "unchanged", model_path)
    (repo / "pyproject.toml").write_text(_block("toml", "[tool.infermeter.check]"))
    git(repo, "add", "pyproject.toml")
    git(repo, "commit", "--quiet", "-m", "settings")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")  # what actions/checkout's full clone has
    command = _check_step(yaml.safe_load(_block("yaml", "infermeter check")))
    argv = shlex.split(command.replace("${{ github.base_ref }}", "main"))
    assert argv[:2] == ["infermeter", "check"]
    summary = tmp_path / "github-step-summary.md"
    summary.write_text("## an earlier step\n")
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run(
        [sys.executable, "-m", "infermeter", *argv[1:], *FAST, "--threshold", "50%"],
        cwd=repo, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    text = summary.read_text()
    assert text.startswith("## an earlier step\n## infermeter check: ✅ passed")  # appended, as GitHub expects
    assert f"`{table['model']}` against baseline `git:origin/main`" in text
    assert "| latency onnxruntime | ✅ pass |" in text
    suite = ET.parse(repo / "infermeter-check.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("3", "0")
    assert len(worktrees(repo)) == 1
