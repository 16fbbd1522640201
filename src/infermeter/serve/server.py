"""Running the ASGI app under uvicorn: in the foreground (`infermeter serve`), in a thread (tests, tools) or as a
child process (`load` and `tune-batching` with a model target)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import IO

import uvicorn

from infermeter.core.errors import BackendError, UsageError
from infermeter.results.env import default_threads
from infermeter.serve.app import build_app
from infermeter.serve.model import ServeConfig, ServedModel
from infermeter.serve.state import ServerState

LISTENING_PREFIX = "infermeter serve: listening on "
GRPC_LISTENING_PREFIX = "infermeter serve: gRPC listening on "


class _Server(uvicorn.Server):
    """Uvicorn's server, minus re-raising the captured signal after a graceful shutdown (so that SIGTERM and
    Ctrl-C end `infermeter serve` with exit code 0 once every accepted request has been answered)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one, read back with getsockname)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port") from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _uvicorn(state: ServerState, log_level: str) -> _Server:
    config = uvicorn.Config(
        build_app(state),
        log_level=log_level,
        access_log=False,
        lifespan="on",
        backlog=2048,
        timeout_keep_alive=30,
    )
    return _Server(config)


def build_state(config: ServeConfig) -> ServerState:
    """Resolve the model and backend (fast checks, raising InfermeterError) without loading anything yet."""
    threads = config.threads or default_threads()
    return ServerState(ServedModel(config), threads)


def start_grpc(state: ServerState, host: str, port: int | None) -> str | None:
    """Start the gRPC service beside HTTP when `port` is given (0: a free one); its host:port, or None. It stops
    when the state closes, before the batcher."""
    if port is None:
        return None
    from infermeter.serve.grpc_server import GrpcServer

    server = GrpcServer(state, host, port)
    server.start()
    state.on_close.insert(0, server.stop)
    return server.address


def serve_foreground(
    config: ServeConfig,
    host: str,
    port: int,
    on_listening: Callable[[str, str | None], None],
    log_level: str = "warning",
    grpc_port: int | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; then finish every accepted request and return. Raises BackendError when the
    model fails to load (after the listener has been closed). With `grpc_port`, the gRPC service listens too."""
    state = build_state(config)
    sock = bind_socket(host, port)
    try:
        grpc_address = start_grpc(state, host, grpc_port)
    except BaseException:
        sock.close()
        raise
    bound_host, bound_port = sock.getsockname()[:2]
    server = _uvicorn(state, log_level)

    def load_failed(_message: str) -> None:
        server.should_exit = True

    state.on_load_failed = load_failed
    shown_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    on_listening(f"http://{shown_host}:{bound_port}", grpc_address)
    server.run(sockets=[sock])
    if state.load_error:
        raise BackendError(f"the model could not be served: {state.load_error}")


class ServerThread:
    """A server on 127.0.0.1 (free port) in a background thread: `with ServerThread(config) as url: ...`."""

    def __init__(
        self, config: ServeConfig, host: str = "127.0.0.1", ready_timeout_s: float = 120.0, grpc: bool = False
    ) -> None:
        self.state = build_state(config)
        self._sock = bind_socket(host, 0)
        # The gRPC service's host:port (a free port) when asked for.
        self.grpc_address = start_grpc(self.state, host, 0 if grpc else None)
        port = self._sock.getsockname()[1]
        self.url = f"http://{host}:{port}"
        self.server = _uvicorn(self.state, "error")
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._ready_timeout_s = ready_timeout_s

    def start(self, wait_ready: bool = True) -> str:
        """Start and (by default) wait until the model is loaded and warmed up; returns the base URL."""
        self._thread.start()
        if not wait_ready:
            return self.url
        if not self.state.loaded.wait(self._ready_timeout_s):
            self.stop()
            raise BackendError(f"the server did not finish loading within {self._ready_timeout_s:g} s")
        if self.state.load_error:
            self.stop()
            raise BackendError(f"the model could not be served: {self.state.load_error}")
        deadline = time.perf_counter() + 10
        while not self.server.started and time.perf_counter() < deadline:
            time.sleep(0.01)
        return self.url

    def stop(self, timeout_s: float = 60.0) -> None:
        """Graceful shutdown: stop accepting, answer accepted requests, close the sessions."""
        self.server.should_exit = True
        self._thread.join(timeout_s)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class ServerProcess:
    """`infermeter serve` in a child process, with the URL it listens on."""

    process: subprocess.Popen[str]
    url: str
    grpc_address: str | None = None  # host:port of the gRPC service, when started with it

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM (graceful shutdown) and wait; kill when it does not end in time. Returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def spawn_server(
    serve_args: list[str], ready_timeout_s: float = 300.0, env: dict[str, str] | None = None, grpc: bool = False
) -> ServerProcess:
    """Start `infermeter serve ARGS --port 0` (and `--grpc-port 0` with `grpc`) in a child process and wait until
    it reports ready.

    A child process, not a thread: the load generator and the server would otherwise share one interpreter
    lock and each would distort the other's figures."""
    command = [sys.executable, "-m", "infermeter", "serve", *serve_args, "--host", "127.0.0.1", "--port", "0"]
    command += ["--grpc-port", "0"] if grpc else []
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None and process.stderr is not None
    line = process.stdout.readline()
    match = re.search(re.escape(LISTENING_PREFIX) + r"(\S+)", line)
    if not match:
        process.wait(30)
        raise BackendError(f"the server did not start: {process.stderr.read().strip() or line.strip()}")
    server = ServerProcess(process, match.group(1))
    if grpc:
        second = process.stdout.readline()
        found = re.search(re.escape(GRPC_LISTENING_PREFIX) + r"(\S+)", second)
        if not found:
            server.stop()
            raise BackendError(f"the server did not start its gRPC service: {second.strip() or 'no message'}")
        server.grpc_address = found.group(1)
    # Drain the child's output in the background so that a chatty server never blocks on a full pipe; keep the
    # tail of stderr for the error message.
    stderr_tail: list[str] = []

    def drain(stream: IO[str], keep: bool) -> None:
        for text in stream:
            if keep:
                stderr_tail.append(text.rstrip())
                del stderr_tail[:-5]

    threading.Thread(target=drain, args=(process.stdout, False), daemon=True).start()
    threading.Thread(target=drain, args=(process.stderr, True), daemon=True).start()
    deadline = time.perf_counter() + ready_timeout_s
    while time.perf_counter() < deadline:
        if process.poll() is not None:
            time.sleep(0.2)  # let the drain thread read the last words
            detail = "; ".join(line for line in stderr_tail if line) or "no message"
            raise BackendError(f"the server exited with code {process.returncode} while loading the model: {detail}")
        try:
            with urllib.request.urlopen(f"{server.url}/v2/health/ready", timeout=5) as response:
                if response.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    server.stop()
    raise BackendError(f"the server was not ready within {ready_timeout_s:g} s")
