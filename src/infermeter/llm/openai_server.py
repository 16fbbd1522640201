"""An OpenAI-compatible server started as a process of its own for a load run against it (`llm load`): the
benchmarks and the tests that measure a real server start theirs here, so that each waits for it, reports a server
that never came up and stops it the same way."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from infermeter.core.errors import BackendError


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def llama_cpp_server_flags(alias: str, *, n_ctx: int = 512, threads: int | None = None) -> list[str]:
    """`python -m llama_cpp.server`'s flags (without --model and --port) for a load run: answers under `alias`, and
    `--interrupt_requests False` so that a request waiting behind another is served in full, not cut short (a cut
    stream is a `short_outputs` level, `llm.short_outputs`)."""
    flags = ["--host", "127.0.0.1", "--n_ctx", str(n_ctx), "--model_alias", alias, "--interrupt_requests", "False"]
    return flags + (["--n_threads", str(threads)] if threads is not None else [])


def llama_cpp_server_command(gguf: Path, port: int, flags: list[str]) -> list[str]:
    """The command that serves `gguf` on `port` with llama-cpp-python's server (its `server` extra)."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), *flags, "--port", str(port)]


@dataclass(frozen=True)
class RunningServer:
    """A started server: its base URL and its process."""

    url: str
    process: subprocess.Popen[bytes]


def _log_tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    return " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])


def wait_until_serving(url: str, process: subprocess.Popen[bytes], timeout_s: float, log: Path | None = None) -> None:
    """Return once the server at `url` lists its models (`/v1/models`); a `BackendError` saying why (its exit code
    and last log lines) when it exits first or stays silent for `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BackendError(f"the server exited with code {process.returncode}: {_log_tail(log)}")
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=2).read()
            return
        except OSError:
            time.sleep(0.3)
    raise BackendError(f"the server did not answer /v1/models within {timeout_s:g} s: {_log_tail(log)}")


@contextlib.contextmanager
def started_server(
    command: list[str],
    url: str,
    *,
    timeout_s: float = 180.0,
    log: Path | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[RunningServer]:
    """Run `command` (a server that will answer at `url`) until the block ends, once it serves; its output goes to
    `log` (else to a file of its own, read back for the error of a server that does not start: a pipe nobody reads
    would stall a server that logs every request). Stopped with SIGTERM, then killed."""
    with contextlib.ExitStack() as stack:
        if log is None:
            log = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="infermeter-server-"))) / "server.log"
        sink = stack.enter_context(log.open("wb"))
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, preexec_fn=preexec_fn)
        try:
            wait_until_serving(url, process, timeout_s, log)
            yield RunningServer(url, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
