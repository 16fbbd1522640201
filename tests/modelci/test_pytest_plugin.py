"""The pytest plugin: declared as a `pytest11` entry point, light to import (it loads in every pytest run), and
running the checks in a sample project's own test suite, configured by its pyproject.toml."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from modelci_sources import VARIANTS

ROOT = Path(__file__).resolve().parents[2]


def test_entry_point_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"infermeter": "infermeter.pytest_plugin"}


def test_plugin_import_is_light() -> None:
    # It is imported by every pytest run in the environment: no framework, no infermeter machinery until used.
    code = (
        "import sys, infermeter.pytest_plugin as p; "
        "heavy = [m for m in ('torch', 'onnxruntime', 'numpy', 'infermeter.modelci') if m in sys.modules]; "
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


SAMPLE_TESTS = """
import pytest


def test_model_ci(infermeter_check):
    report = infermeter_check()
    assert [o.name for o in report.outcomes] == ["export", "parity onnxruntime", "latency onnxruntime"]
    assert report.ok


@pytest.mark.infermeter_check(model="broken.py:build")
def test_broken_model(infermeter_check):
    infermeter_check()


def test_unrelated():
    assert True
"""

SAMPLE_PYPROJECT = """
[project]
name = "sample"
version = "0"

[tool.pytest.ini_options]
addopts = "--strict-markers"

[tool.infermeter.check]
model = "model.py:build"
baseline = "model.py:build"
backends = ["onnxruntime"]
threshold = "50%"
min-time = 0.2
max-time = 2
rounds = 4
threads = 1
samples = 2
"""


def _plugin_args() -> list[str]:
    # Installed from this checkout's metadata, the entry point loads the plugin by itself; from a source tree
    # without it (a development checkout on PYTHONPATH), name it.
    names = {ep.value for ep in entry_points(group="pytest11")}
    return [] if "infermeter.pytest_plugin" in names else ["-p", "infermeter.pytest_plugin"]


@pytest.mark.slow
def test_sample_project_runs_the_checks_in_its_own_suite(tmp_path: Path) -> None:
    project = tmp_path / "sample"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text(SAMPLE_PYPROJECT)
    (project / "model.py").write_text(VARIANTS["unchanged"])
    (project / "broken.py").write_text(VARIANTS["unsupported"])
    (project / "tests" / "test_ci.py").write_text(textwrap.dedent(SAMPLE_TESTS))
    summary = tmp_path / "step-summary.md"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args(), "tests"]
    done = subprocess.run(args, cwd=project, capture_output=True, text=True, timeout=600, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "1 failed, 2 passed" in output
    assert "FAILED tests/test_ci.py::test_broken_model" in output
    assert "infermeter check failed:" in output
    assert "export: operator infermeter_ci_test::wobble is not supported by the ONNX exporters" in output
    text = summary.read_text()
    assert text.count("## infermeter check:") == 2  # each check appended its summary
    assert "## infermeter check: ✅ passed" in text and "`model.py:build` against baseline `model.py:build`" in text
