"""A minimal HTTP/1.1 keep-alive client on raw asyncio protocols, for the load generator.

Why not httpx or aiohttp: a load generator must never be the bottleneck of what it measures. Per request,
httpx and aiohttp build request/response objects, run header parsing in Python and schedule several tasks;
on one core they top out at a few thousand requests per second (see benchmarks/loadgen_clients.py for the
measured figures). Here a request is one pre-built bytes object written to an idle connection, and completion
is a callback from `data_received` that only finds the end of the response (Content-Length framing), so the
issuer stays on schedule at well over 5,000 requests per second.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol, cast
from urllib.parse import urlsplit

# done(status or None, error kind or None, completion time in ns)
DoneCallback = Callable[[int | None, str | None, int], None]


def build_request(host: str, port: int, method: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """The raw bytes of one HTTP/1.1 keep-alive request."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._done: DoneCallback | None = None
        self._need: int | None = None  # total bytes of the current response once its header is parsed
        self._body_at = 0  # where its body starts
        self._status = 0
        self._close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def send(self, request: bytes, done: DoneCallback) -> None:
        assert self.transport is not None
        self._done = done
        self._need = None
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._need is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            header = bytes(self._buffer[:end]).lower()
            try:
                self._status = int(header[9:12])
            except ValueError:
                self._fail("bad_response")
                return
            at = header.find(b"\r\ncontent-length:")
            if at < 0:
                self._fail("no_content_length")
                return
            stop = header.find(b"\r\n", at + 2)
            self._body_at = end + 4
            self._need = end + 4 + int(header[at + 17 : stop if stop > 0 else len(header)])
            self._close_after = b"\r\nconnection: close" in header
        if len(self._buffer) >= self._need:
            if self._status != 200:  # a refusal: what the server said, once per status (not on the hot path)
                self._pool.note_refusal(f"http_{self._status}", bytes(self._buffer[self._body_at : self._need]))
            del self._buffer[: self._need]
            done, self._done, self._need = self._done, None, None
            if self._close_after and self.transport is not None:
                self.transport.close()
            else:
                self._pool.release(self)
            if done is not None:
                done(self._status, None, time.perf_counter_ns())

    def _fail(self, kind: str) -> None:
        done, self._done = self._done, None
        if self.transport is not None:
            self.transport.close()
        if done is not None:
            done(None, kind, time.perf_counter_ns())

    def connection_lost(self, exc: Exception | None) -> None:
        self._pool.forget(self)
        self.transport = None
        if self._done is not None:
            self._fail("connection_closed")


class RequestPool(Protocol):
    """What the load generator sends through: HTTP connections or a gRPC channel."""

    def request(self, request: bytes, done: DoneCallback) -> None:
        """Send one pre-built request now (or queue it); `done` is called once it answers or fails."""

    async def aclose(self) -> None:
        """Release the connections (on the loop that opened them)."""

    @property
    def messages(self) -> dict[str, str]:
        """The server's message of the first refusal of each error kind (`http_400`, `grpc_invalid_argument`)."""


class ConnectionPool:
    """Keep-alive connections to one server, opened on demand up to `max_connections`; requests beyond that
    wait in order (and their waiting counts in their latency, which the caller measures from its own clock)."""

    def __init__(self, url: str, max_connections: int = 1024) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"only http:// URLs are supported, got {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.max_connections = max_connections
        self._idle: list[_Connection] = []
        self._open = 0
        self._waiting: deque[tuple[bytes, DoneCallback]] = deque()
        self._tasks: set[asyncio.Task[None]] = set()
        self.connect_errors = 0
        self.messages: dict[str, str] = {}

    def note_refusal(self, kind: str, body: bytes) -> None:
        """Keep the server's message of the first refusal of `kind` (KServe's `{"error": ...}`, or the text)."""
        if kind not in self.messages:
            self.messages[kind] = server_message(body)

    @property
    def open_connections(self) -> int:
        """Connections open or being opened."""
        return self._open

    def request(self, request: bytes, done: DoneCallback) -> None:
        """Send `request` now on an idle connection, or open one, or queue it (no await: callable from anywhere
        on the loop, which keeps the issuer's cost per request small)."""
        if self._idle:
            self._idle.pop().send(request, done)
        elif self._open < self.max_connections:
            self._open += 1
            task = asyncio.get_running_loop().create_task(self._connect_and_send(request, done))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._waiting.append((request, done))

    async def _connect_and_send(self, request: bytes, done: DoneCallback) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(lambda: _Connection(self), self.host, self.port)
        except OSError:
            self._open -= 1
            self.connect_errors += 1
            done(None, "connect_failed", time.perf_counter_ns())
            return
        connection.send(request, done)

    def release(self, connection: _Connection) -> None:
        """A connection finished its response: give it the next waiting request or park it."""
        if self._waiting:
            request, done = self._waiting.popleft()
            connection.send(request, done)
        else:
            self._idle.append(connection)

    def forget(self, connection: _Connection) -> None:
        """A connection closed."""
        if connection in self._idle:
            self._idle.remove(connection)
        self._open -= 1
        if self._waiting and self._open < self.max_connections:
            request, done = self._waiting.popleft()
            self.request(request, done)

    async def aclose(self) -> None:
        """Close every idle connection (the same call as the gRPC pool's)."""
        self.close()

    def close(self) -> None:
        """Close every idle connection."""
        for connection in self._idle:
            if connection.transport is not None:
                connection.transport.close()
        self._idle.clear()


def server_message(body: bytes) -> str:
    """One line of what a server said in a refusal's body: the `error` of a JSON object, else the text."""
    text = body.decode(errors="replace")
    try:
        error = json.loads(text).get("error")
        if error:
            text = str(error.get("message") if isinstance(error, dict) else error)
    except (ValueError, AttributeError):
        pass
    return " ".join(text.split())[:200]


async def fetch(
    url: str, method: str = "GET", body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request on its own connection, returning (status, body); for metadata look-ups, not for load."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        writer.write(build_request(host, port, method, path or "/", body, {**(headers or {}), "Connection": "close"}))
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head[9:12]), payload
