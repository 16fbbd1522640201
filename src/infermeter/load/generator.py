"""The load generator, after MLPerf LoadGen's scenarios.

- server: Poisson (or constant) arrivals at a target QPS, from `load.arrivals`. Each request's latency runs from
  its SCHEDULED time, not from when it was sent (`load.timing`, the definition the OpenAI sweep shares), so a
  generator or connection pool that falls behind cannot hide the wait (no coordinated omission). The lag between
  schedule and issue is measured and reported on its own.
- single-stream: one request in flight; the next is sent when the previous answers.
- offline / closed loop: N requests always in flight (maximum throughput at concurrency N).

All runs share one event loop (uvloop when installed) and the raw keep-alive client of `httpclient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from infermeter.load.arrivals import Arrivals, paced
from infermeter.load.http_client import RequestPool
from infermeter.load.timing import Issue

if TYPE_CHECKING:
    from infermeter.load.server_stats import ServerSide

T = TypeVar("T")


@dataclass
class LoadRun:
    """The raw outcome of one scenario run; times in milliseconds unless named otherwise."""

    scenario: str
    duration_s: float
    _: KW_ONLY  # the rest by keyword
    target_qps: float | None = None
    concurrency: int | None = None
    latencies_ms: list[float] = field(default_factory=list)  # successful requests only
    lag_ms: list[float] = field(default_factory=list)  # issue time minus scheduled time (server scenario)
    scheduled_s: list[float] = field(default_factory=list)  # offsets from the start (server scenario)
    errors: Counter[str] = field(default_factory=Counter)
    messages: dict[str, str] = field(default_factory=dict)  # the server's word on the first refusal of each kind
    server: ServerSide | None = None  # the server's own account of the run (batches, queue wait), when it gives one
    issued: int = 0
    elapsed_s: float = 0.0  # from the first issue to the last completion

    @property
    def ok(self) -> int:
        """Requests answered with HTTP 200."""
        return len(self.latencies_ms)

    @property
    def achieved_qps(self) -> float:
        """Successful requests per second over the whole run, drain included."""
        return self.ok / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def offered_qps(self) -> float:
        """Requests issued per second of the issuing window."""
        return self.issued / self.duration_s if self.duration_s > 0 else 0.0


def run_async(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine on a fresh event loop, uvloop when installed (faster I/O and timers)."""
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(_await(factory))


async def _await(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


class _Tracker:
    """Counts outstanding requests; `drained` fires when none is left after issuing stopped."""

    def __init__(self, run: LoadRun) -> None:
        self.run = run
        self.outstanding = 0
        self.closed = False
        self.drained = asyncio.get_running_loop().create_future()
        self.last_done_ns = 0

    def record(self, sent: Issue, status: int | None, error: str | None, done_ns: int) -> None:
        if self.closed:
            return  # answered after the drain deadline: already counted as a timeout
        self.outstanding -= 1
        self.last_done_ns = max(self.last_done_ns, done_ns)
        if status == 200:
            self.run.latencies_ms.append(sent.latency_ms(done_ns))
        else:
            self.run.errors[error or f"http_{status}"] += 1

    def check_drained(self, issuing: bool) -> None:
        if not issuing and self.outstanding == 0 and not self.drained.done():
            self.drained.set_result(None)

    async def drain(self, timeout_s: float) -> None:
        self.check_drained(issuing=False)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.drained), timeout_s)
        if self.outstanding:
            self.run.errors["timeout"] += self.outstanding
        self.closed = True


async def run_server(
    pool: RequestPool,
    requests: list[bytes],
    qps: float,
    duration_s: float,
    seed: int = 0,
    timeout_s: float = 30.0,
    arrivals: str = "poisson",
) -> LoadRun:
    """The server scenario: `arrivals` (Poisson or constant) at `qps` for `duration_s`; latency from each
    scheduled time (`load.timing`)."""
    schedule_s = Arrivals(qps, arrivals, seed).offsets_s(duration_s=duration_s)
    run = LoadRun("server", duration_s, target_qps=qps)
    tracker = _Tracker(run)
    issuing = True

    def issue(sent: Issue) -> None:
        def done(status: int | None, error: str | None, done_ns: int) -> None:
            tracker.record(sent, status, error, done_ns)
            tracker.check_drained(issuing)

        tracker.outstanding += 1
        pool.request(requests[sent.index % len(requests)], done)

    lags = np.zeros(len(schedule_s), dtype=np.int64)
    start_ns = time.perf_counter_ns() + 1_000_000  # a millisecond ahead, so the first arrival is on time
    async for sent in paced(schedule_s, start_ns):
        lags[sent.index] = sent.lag_ns
        issue(sent)
    issuing = False
    run.issued = len(schedule_s)
    run.lag_ms = (lags / 1e6).tolist()
    run.scheduled_s = schedule_s.tolist()
    await tracker.drain(timeout_s)
    run.elapsed_s = max(tracker.last_done_ns - start_ns, 1) / 1e9
    return run


async def run_closed_loop(
    pool: RequestPool,
    requests: list[bytes],
    concurrency: int,
    duration_s: float,
    timeout_s: float = 30.0,
    scenario: str = "offline",
) -> LoadRun:
    """`concurrency` requests always in flight for `duration_s` (1: single-stream); latency from send."""
    run = LoadRun(scenario, duration_s, concurrency=concurrency)
    tracker = _Tracker(run)
    start_ns = time.perf_counter_ns()
    stop_ns = start_ns + int(duration_s * 1e9)
    state = {"issuing": True}

    def send() -> None:
        sent = Issue.now(run.issued)
        if sent.sent_ns >= stop_ns:
            state["issuing"] = False
            tracker.check_drained(False)
            return
        run.issued += 1
        tracker.outstanding += 1

        def done(status: int | None, error: str | None, done_ns: int) -> None:
            tracker.record(sent, status, error, done_ns)
            if not tracker.closed:
                send()

        pool.request(requests[sent.index % len(requests)], done)

    for _ in range(concurrency):
        send()
    remaining_s = (stop_ns - time.perf_counter_ns()) / 1e9
    if remaining_s > 0:
        await asyncio.sleep(remaining_s)
    state["issuing"] = False
    await tracker.drain(timeout_s)
    run.elapsed_s = max(tracker.last_done_ns - start_ns, 1) / 1e9
    return run
