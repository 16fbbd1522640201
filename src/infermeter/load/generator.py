"""The one load generator, for every protocol client (`load.client`), after MLPerf LoadGen's scenarios.

- open loop (`open_loop`; `load`'s server scenario, `llm load --rates`): arrivals at a rate from `load.arrivals`
  (Poisson or constant), for a duration or a request count, whatever is in flight. Each request's latency runs from
  its SCHEDULED time, not from when it was sent (`load.timing`), so a generator or connection pool that falls
  behind cannot hide the wait (no coordinated omission); the lag between schedule and issue is reported on its own.
- closed loop (`closed_loop`; single-stream, offline, `llm load --concurrency`): N requests always in flight, the
  next sent when one answers, for a duration or a request count; each is scheduled when sent (lag 0).

`run_server` and `run_closed_loop` are the KServe runs of `load` (a `LoadRun` of latencies and errors by kind).
All runs share one event loop (uvloop when installed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from infermeter.load.arrivals import Arrivals, paced
from infermeter.load.client import KServeClient, LoadClient
from infermeter.load.http_client import RequestPool
from infermeter.load.timing import Issue

if TYPE_CHECKING:
    from infermeter.load.server_stats import ServerSide

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Traffic(Generic[R]):
    """What one run of the generator sent and got back: each answer (its issue, the client's outcome, the answer
    time in ns) in the order answered, how many were issued, the open loop's schedule (offsets in s) and each
    issue's lag (ms), how many were left unanswered at the drain deadline, and the seconds from the start to the
    last answer."""

    answers: list[tuple[Issue, R, int]] = field(default_factory=list)
    issued: int = 0
    scheduled_s: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)
    unanswered: int = 0
    elapsed_s: float = 0.0


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


class _Tracker(Generic[R]):
    """Counts outstanding requests and keeps the answers; `stopped` fires when issuing stops, `drained` when
    no request is left after that; `after` runs after each answer (the closed loop's next send)."""

    def __init__(self, traffic: Traffic[R]) -> None:
        loop = asyncio.get_running_loop()
        self.traffic = traffic
        self.outstanding = 0
        self.closed = False
        self.stopped = loop.create_future()
        self.drained = loop.create_future()
        self.last_done_ns = 0
        self.after: Callable[[], None] | None = None

    def issue(self, client: LoadClient[R], issue: Issue) -> None:
        self.outstanding += 1
        self.traffic.issued += 1
        client.send(issue, self.answered)

    def answered(self, issue: Issue, outcome: R, done_ns: int) -> None:
        if self.closed:
            return  # answered after the drain deadline: already counted as unanswered
        self.outstanding -= 1
        self.last_done_ns = max(self.last_done_ns, done_ns)
        self.traffic.answers.append((issue, outcome, done_ns))
        if self.after is not None:
            self.after()
        self._check_drained()

    def stop_issuing(self) -> None:
        if not self.stopped.done():
            self.stopped.set_result(None)
        self._check_drained()

    def _check_drained(self) -> None:
        if self.stopped.done() and self.outstanding == 0 and not self.drained.done():
            self.drained.set_result(None)

    async def drain(self, timeout_s: float | None) -> None:
        """Wait for the answers still outstanding (at most `timeout_s`; None: all of them)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.drained), timeout_s)
        self.traffic.unanswered = self.outstanding
        self.closed = True


async def open_loop(
    client: LoadClient[R],
    arrivals: Arrivals,
    *,
    duration_s: float | None = None,
    requests: int | None = None,
    drain_timeout_s: float | None = 30.0,
) -> Traffic[R]:
    """Send a request at each arrival of `arrivals` (those before `duration_s`, or the first `requests`) whatever
    is in flight, then wait up to `drain_timeout_s` (None: until every one answered) for the last answers."""
    schedule_s = arrivals.offsets_s(duration_s, requests)
    traffic: Traffic[R] = Traffic(scheduled_s=schedule_s.tolist())
    tracker = _Tracker(traffic)
    lags = np.zeros(len(schedule_s), dtype=np.int64)
    start_ns = time.perf_counter_ns() + 1_000_000  # a millisecond ahead, so the first arrival is on time
    async for sent in paced(schedule_s, start_ns):
        lags[sent.index] = sent.lag_ns
        tracker.issue(client, sent)
    tracker.stop_issuing()
    traffic.lag_ms = (lags / 1e6).tolist()
    await tracker.drain(drain_timeout_s)
    traffic.elapsed_s = max(tracker.last_done_ns - start_ns, 1) / 1e9
    return traffic


async def closed_loop(
    client: LoadClient[R],
    concurrency: int,
    *,
    duration_s: float | None = None,
    requests: int | None = None,
    drain_timeout_s: float | None = 30.0,
) -> Traffic[R]:
    """`concurrency` requests always in flight, each sent when one answers, until `duration_s` passed or
    `requests` were sent; then wait up to `drain_timeout_s` (None: until every one answered) for the last."""
    if (duration_s is None) == (requests is None):
        raise ValueError("a closed loop runs for a duration or a request count, not both")
    traffic: Traffic[R] = Traffic()
    tracker = _Tracker(traffic)
    start_ns = time.perf_counter_ns()
    stop_ns = None if duration_s is None else start_ns + int(duration_s * 1e9)

    def send_next() -> None:
        if tracker.stopped.done():
            return
        sent = Issue.now(traffic.issued)
        if (stop_ns is not None and sent.sent_ns >= stop_ns) or (requests is not None and sent.index >= requests):
            tracker.stop_issuing()
            return
        tracker.issue(client, sent)

    tracker.after = send_next
    for _ in range(concurrency):
        send_next()
    if stop_ns is None:
        await tracker.stopped  # the count was reached
    else:
        remaining_s = (stop_ns - time.perf_counter_ns()) / 1e9
        if remaining_s > 0:
            await asyncio.sleep(remaining_s)
        tracker.stop_issuing()
    await tracker.drain(drain_timeout_s)
    traffic.elapsed_s = max(tracker.last_done_ns - start_ns, 1) / 1e9
    return traffic


def _kserve_run(run: LoadRun, traffic: Traffic[str | None]) -> LoadRun:
    """`run` filled from the generator's traffic: latencies of the answers (from their scheduled times), errors
    by kind (those left unanswered at the deadline as `timeout`)."""
    for issue, error, done_ns in traffic.answers:
        if error is None:
            run.latencies_ms.append(issue.latency_ms(done_ns))
        else:
            run.errors[error] += 1
    if traffic.unanswered:
        run.errors["timeout"] += traffic.unanswered
    run.issued, run.elapsed_s = traffic.issued, traffic.elapsed_s
    run.scheduled_s, run.lag_ms = traffic.scheduled_s, traffic.lag_ms
    return run


async def run_server(
    pool: RequestPool,
    requests: list[bytes],
    qps: float,
    duration_s: float,
    seed: int = 0,
    timeout_s: float = 30.0,
    arrivals: str = "poisson",
) -> LoadRun:
    """The KServe server scenario: `arrivals` (Poisson or constant) at `qps` for `duration_s` (`open_loop`)."""
    client = KServeClient(pool, requests)
    traffic = await open_loop(client, Arrivals(qps, arrivals, seed), duration_s=duration_s, drain_timeout_s=timeout_s)
    return _kserve_run(LoadRun("server", duration_s, target_qps=qps), traffic)


async def run_closed_loop(
    pool: RequestPool,
    requests: list[bytes],
    concurrency: int,
    duration_s: float,
    timeout_s: float = 30.0,
    scenario: str = "offline",
) -> LoadRun:
    """KServe requests, `concurrency` always in flight for `duration_s` (1: single-stream; `closed_loop`)."""
    client = KServeClient(pool, requests)
    traffic = await closed_loop(client, concurrency, duration_s=duration_s, drain_timeout_s=timeout_s)
    return _kserve_run(LoadRun(scenario, duration_s, concurrency=concurrency), traffic)
