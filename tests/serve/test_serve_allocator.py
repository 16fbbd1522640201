"""`serve --allocator`: the server runs on the malloc a soak chose (MALLOC_ARENA_MAX, or jemalloc preloaded)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from infermeter.measure.allocator import allocator_unavailable


def _serving_process(allocator: str) -> tuple[subprocess.Popen[str], int]:
    """`infermeter serve tiny_cnn -b null --allocator ALLOCATOR` started, and the pid that serves once it listens."""
    command = [sys.executable, "-m", "infermeter", "serve", "tiny_cnn", "-b", "null", "--port", "0"]
    command += ["--threads", "1", "--allocator", allocator]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "listening on " in line, process.stderr.read() if process.stderr else line
    return process, process.pid  # os.execve keeps the pid: the listening process is the one started


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def test_serve_restarts_itself_with_the_arena_cap_it_was_given() -> None:
    process, pid = _serving_process("arenas=2")
    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"MALLOC_ARENA_MAX=2" in environment
    finally:
        _stop(process)


@pytest.mark.skipif(allocator_unavailable("jemalloc") is not None, reason="libjemalloc2 is not installed here")
def test_serve_runs_on_jemalloc_when_asked() -> None:
    process, pid = _serving_process("jemalloc")
    try:
        assert "libjemalloc" in Path(f"/proc/{pid}/maps").read_text()
    finally:
        _stop(process)


def test_an_unknown_allocator_is_refused_in_one_line() -> None:
    command = [sys.executable, "-m", "infermeter", "serve", "tiny_cnn", "-b", "null", "--allocator", "hoard"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: --allocator 'hoard'")
