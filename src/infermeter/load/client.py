"""One protocol-client interface for the load generator (`load.generator`), whatever the protocol: the generator
hands a client each request's `Issue` (its index, its scheduled and actual send time) and the client calls back
once the request answered or failed, with its outcome and the time of the answer. Latency is then counted from the
issue's scheduled time by one rule (`load.timing`) for every protocol.

The clients: `KServeClient` here, KServe v2 over HTTP (`http_client.ConnectionPool`) or gRPC
(`grpc_client.GrpcPool`), whose outcome is None for an answer and the error kind for a refusal; and OpenAI
streaming (`llm.openai_client.OpenAIClient`), whose outcome is the stream's `RequestTiming`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from infermeter.load.http_client import RequestPool
from infermeter.load.timing import Issue

R_co = TypeVar("R_co", covariant=True)


class LoadClient(Protocol[R_co]):
    """What the load generator sends through."""

    def send(self, issue: Issue, done: Callable[[Issue, R_co, int], None]) -> None:
        """Send request `issue.index` now, without awaiting (the generator's pacing must not wait on a request);
        call `done(issue, outcome, answered_ns)` once, on the loop, when it answered or failed (answered_ns on
        `time.perf_counter_ns`)."""


class KServeClient:
    """KServe v2 requests through a pool of HTTP connections or a gRPC channel: request i is the pre-built body
    i modulo their count; the outcome is None for an answer (HTTP 200, gRPC OK), else the error kind (`http_503`,
    `grpc_unavailable`, `connect_failed`)."""

    def __init__(self, pool: RequestPool, requests: list[bytes]) -> None:
        self.pool = pool
        self.requests = requests

    def send(self, issue: Issue, done: Callable[[Issue, str | None, int], None]) -> None:
        """Send the request of `issue` through the pool."""

        def answered(status: int | None, error: str | None, answered_ns: int) -> None:
            done(issue, None if status == 200 else error or f"http_{status}", answered_ns)

        self.pool.request(self.requests[issue.index % len(self.requests)], answered)
