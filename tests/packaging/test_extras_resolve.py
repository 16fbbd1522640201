"""No extra brings a CUDA build of torch or an NVIDIA wheel: each extra is resolved by pip against the package
registry (`pip install --dry-run --report`, nothing installed) and the resolved set is read.

An extra's requirements are the core's plus its own, `infermeter[...]` self-references expanded, exactly what
`pip install 'infermeter[EXTRA]'` asks the resolver for (without building the project to get there). The resolver
runs with pip's own configuration; the CPU build of torch must be findable there, as the Makefile installs it.

A resolution takes 4-17 s here (llama-cpp-python's metadata is built from its sdist), so each extra's result is
kept under `.venv-matrix/resolved/` for a day, keyed by its requirements, pip's configuration and this Python:
a dependency change re-resolves at once, a change on the registry's side within a day.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from venv_cells import MATRIX, PIP_QUIET, core_requirements, optional_dependencies

# Wheels that exist only for an NVIDIA GPU: CUDA libraries, and the Triton compiler a CUDA torch brings.
CUDA_NAMES = re.compile(r"^(nvidia-|cuda-|triton$)")
RESOLVED = MATRIX / "resolved"
MAX_AGE_S = 24 * 3600


def extra_requirements(extra: str) -> list[str]:
    """Every requirement `pip install 'infermeter[extra]'` resolves: the core's and the extra's, expanded."""
    requirements = set(core_requirements())
    pending, seen = [extra], set()
    while pending:
        name = pending.pop()
        seen.add(name)
        for requirement in optional_dependencies()[name]:
            match = re.fullmatch(r"infermeter\[(.+)\]", requirement)
            if match:
                pending += [sub.strip() for sub in match.group(1).split(",") if sub.strip() not in seen]
            else:
                requirements.add(requirement)
    return sorted(requirements)


def index_url() -> str:
    """The registry pip resolves against here: PIP_INDEX_URL, pip's configuration, else PyPI."""
    configured = os.environ.get("PIP_INDEX_URL")
    if not configured:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.index-url"], capture_output=True, text=True
        )
        configured = proc.stdout.strip() if proc.returncode == 0 else ""
    return configured or "https://pypi.org/simple"


@functools.cache
def pip_configuration() -> str:
    """pip's effective configuration (indexes, find-links, constraints): part of a resolution's cache key."""
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    return proc.stdout


@functools.cache
def registry_problem() -> str | None:
    """Why the registry cannot be reached (None when it can)."""
    url = index_url().rstrip("/") + "/pip/"
    try:
        with urllib.request.urlopen(url, timeout=15):
            return None
    except (urllib.error.URLError, OSError) as exc:
        return f"the package registry is unreachable ({url}: {exc}); extras cannot be resolved here"


def resolve(extra: str, folder: Path) -> list[tuple[str, str]] | str:
    """(name, version) of every distribution pip would install for `extra` into an empty environment (from the
    day's cache when it holds this exact question), or why the registry cannot answer."""
    key = json.dumps([extra_requirements(extra), pip_configuration(), sys.version])
    cached = RESOLVED / f"{extra}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if cached.is_file() and time.time() - cached.stat().st_mtime < MAX_AGE_S:
        return [(name, version) for name, version in json.loads(cached.read_text())]
    problem = registry_problem()
    if problem:
        return problem
    report = folder / f"{extra}.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", str(report)]
    proc = subprocess.run([*command, *PIP_QUIET, *extra_requirements(extra)], capture_output=True, text=True)
    assert proc.returncode == 0, f"pip could not resolve [{extra}]:\n{proc.stderr[-3000:]}"
    installs = json.loads(report.read_text())["install"]
    resolved = [(item["metadata"]["name"].lower(), item["metadata"]["version"]) for item in installs]
    RESOLVED.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(resolved))
    return resolved


def cuda_wheels(resolved: list[tuple[str, str]]) -> list[str]:
    """The resolved distributions that are GPU-only: NVIDIA libraries, or a torch that is not the CPU build."""
    return [
        f"{name}=={version}"
        for name, version in resolved
        if CUDA_NAMES.match(name) or (name == "torch" and not version.endswith("+cpu"))
    ]


def test_extra_requirements_expand_self_references() -> None:
    requirements = extra_requirements("all-cpu")
    assert not any(r.startswith("infermeter") for r in requirements)
    assert "torch==2.13.0" in requirements and "onnxruntime>=1.20" in requirements
    assert set(extra_requirements("onnxruntime")) - set(core_requirements()) == {"onnx>=1.16", "onnxruntime>=1.20"}


def test_the_cuda_check_flags_what_it_must() -> None:
    resolved = [("torch", "2.14.1"), ("nvidia-cublas", "13.0"), ("triton", "3.5"), ("tritonclient", "2.5")]
    assert cuda_wheels(resolved) == ["torch==2.14.1", "nvidia-cublas==13.0", "triton==3.5"]
    assert cuda_wheels([("torch", "2.13.0+cpu"), ("numpy", "2.3")]) == []


@pytest.mark.slow
def test_no_extra_resolves_to_a_cuda_wheel(tmp_path: Path) -> None:
    extras = sorted(optional_dependencies())
    # Resolution waits on the registry as much as on the CPU: a few at once.
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = dict(zip(extras, pool.map(lambda extra: resolve(extra, tmp_path), extras), strict=True))
    problems = {answer for answer in answers.values() if isinstance(answer, str)}
    if problems:
        pytest.skip(problems.pop())
    results = {extra: answer for extra, answer in answers.items() if not isinstance(answer, str)}
    found = {extra: cuda_wheels(resolved) for extra, resolved in results.items() if cuda_wheels(resolved)}
    assert not found, f"extras that would install GPU-only wheels: {found}"
    torch_extras = {extra for extra, resolved in results.items() if any(name == "torch" for name, _ in resolved)}
    # The extras that are meant to bring torch, and only those (an unpinned torch sneaking in shows up here too).
    assert torch_extras == {"torch", "text-models", "llm", "all-cpu"}, torch_extras
