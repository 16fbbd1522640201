"""`infermeter check` on a tiny model and its broken copies: each fails with its reason and exit code 1; bad input
exits 2. The git baseline's worktree is gone afterwards.

The latency gate and the interrupts run the CLI in a process of its own, as a user does; the checks that measure
nothing (a failed export, no baseline) and the usage errors call its entry point in this process (`run_main`)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cli_helpers import run_cli, run_main
from modelci_sources import model_repo, worktrees

# Short measurements: the slowdown tested is tens of times, and the unchanged model must not fail on noise.
FAST = ("--min-time", "0.2", "--max-time", "2", "--rounds", "4", "--threads", "1", "--samples", "2")
LOOSE = ("--threshold", "50%")


def _junit(path: Path) -> dict[str, ET.Element]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return {case.get("name", ""): case for case in suite.iter("testcase")}


@pytest.mark.slow
def test_slower_copy_fails_the_latency_gate_against_git_head(tmp_path: Path) -> None:
    model = model_repo(tmp_path / "repo", "slower")
    junit, summary = tmp_path / "check.xml", tmp_path / "summary.md"
    args = ("check", f"{model}:build", "--baseline", "git:HEAD", "--junit", str(junit), "--summary", str(summary))
    done = run_cli(*args, *FAST, *LOOSE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "check failed: latency onnxruntime" in done.stderr
    cases = _junit(junit)
    failure = cases["latency onnxruntime"].find("failure")
    assert failure is not None and "decided slower by the 50% threshold" in failure.get("message", "")
    assert cases["export"].find("failure") is None and cases["parity onnxruntime"].find("failure") is None
    text = summary.read_text()
    assert "## infermeter check: ❌ failed (1 of 3 checks)" in text
    assert "| latency onnxruntime | ❌ FAIL |" in text and "| baseline | `git:HEAD` |" in text
    assert len(worktrees(tmp_path / "repo")) == 1  # the baseline's worktree was removed


@pytest.mark.slow
def test_unsupported_operator_is_named_with_its_module(tmp_path: Path) -> None:
    model = model_repo(tmp_path / "repo", "unsupported")
    junit = tmp_path / "check.xml"
    done = run_main("check", f"{model}:build", "--baseline", "git:HEAD", "--junit", str(junit), *FAST)
    assert done.returncode == 1, done.stdout + done.stderr
    cases = _junit(junit)
    failure = cases["export"].find("failure")
    assert failure is not None
    message = failure.get("message", "")
    assert "operator infermeter_ci_test::wobble" in message and "not supported by the ONNX exporters" in message
    assert "called in body.0 (Block, model.py:" in message and "body.1 (Block, model.py:" in message
    # Nothing to serve the engine or to measure: both said, neither passes silently.
    assert cases["parity onnxruntime"].find("skipped") is not None
    assert cases["latency onnxruntime"].find("skipped") is not None
    assert len(worktrees(tmp_path / "repo")) == 1


@pytest.mark.slow
def test_wrong_outputs_fail_export_verification_and_parity(tmp_path: Path) -> None:
    model = model_repo(tmp_path / "repo", "wrong")
    junit = tmp_path / "check.xml"
    done = run_main("check", f"{model}:build", "--junit", str(junit), *FAST)
    assert done.returncode == 1, done.stdout + done.stderr
    cases = _junit(junit)
    export, parity = cases["export"].find("failure"), cases["parity onnxruntime"].find("failure")
    assert export is not None and "outputs match PyTorch" in export.get("message", "")
    assert parity is not None and "exceeds" in parity.get("message", "")
    assert cases["latency onnxruntime"].find("skipped") is not None  # no --baseline


@pytest.mark.slow
def test_usage_errors_exit_2_before_any_work(tmp_path: Path) -> None:
    model = model_repo(tmp_path / "repo")
    done = run_main("check", f"{model}:build", "-b", "nosuchengine")
    assert done.returncode == 2 and "unknown backend 'nosuchengine'" in done.stderr, done.stderr
    done = run_main("check", f"{model}:build", "--baseline", "git:no-such-branch")
    assert done.returncode == 2 and "no such revision" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    done = run_main("check", f"{model}:build", "--threshold", "lots")
    assert done.returncode == 2 and "--threshold 'lots' is not a fraction" in done.stderr, done.stderr
    assert len(worktrees(tmp_path / "repo")) == 1


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_check_removes_the_baseline_worktree(tmp_path: Path, signum: int) -> None:
    model = model_repo(tmp_path / "repo")
    args = [sys.executable, "-m", "infermeter", "check", f"{model}:build", "--baseline", "git:HEAD", *FAST]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(worktrees(tmp_path / "repo")) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        trees = worktrees(tmp_path / "repo")
        assert len(trees) == 2, "the baseline's worktree never appeared"
        checkout = Path(trees[1].removeprefix("worktree "))
        time.sleep(1.0)  # into the export
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert len(worktrees(tmp_path / "repo")) == 1 and not checkout.exists()
