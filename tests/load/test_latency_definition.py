"""One meaning of latency for both protocols: against a server slowed on purpose (one worker, so the queue grows)
and a client held up on purpose at the start, the one load generator's open loop through the KServe client
(`load`'s server scenario) and through the OpenAI streaming client (an `llm load --rates` level), at the same
rate, times each request from its scheduled send time, so each latency holds its wait in the queue and the
client's own lag, which both report beside."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import numpy as np
from fake_openai import FakeOpenAIServer
from serve_helpers import make_server

from infermeter.llm.openai_bench import EndpointSettings
from infermeter.llm.openai_client import run_openai_level
from infermeter.load.arrivals import Arrivals
from infermeter.load.generator import run_async, run_server
from infermeter.load.http_client import ConnectionPool
from infermeter.load.target import prepare_target

T = TypeVar("T")
RATE_PER_S = 50.0  # a request every 20 ms
SERVICE_S = 0.04  # each takes at least 40 ms on the one worker: the queue grows by one request every 40 ms
REQUESTS = 20
HOLD_S = 0.3  # the client's loop is blocked this long at the start: the first requests go out late


def _queue_bound_ms(offsets_s: np.ndarray) -> float:
    """The least mean latency (ms, from the scheduled times) any one-worker server of SERVICE_S per request can
    give: FIFO departures by Lindley's recursion (with equal service times, any order gives the same sum)."""
    done, total = 0.0, 0.0
    for offset in offsets_s:
        done = max(offset, done) + SERVICE_S
        total += done - offset
    return total / len(offsets_s) * 1e3


async def _held_up(body: Callable[[], Awaitable[T]]) -> T:
    """Run `body` with the event loop blocked for HOLD_S once it first yields (a client falling behind)."""

    async def block() -> None:
        time.sleep(HOLD_S)

    blocker = asyncio.create_task(block())
    try:
        return await body()
    finally:
        await blocker


def test_kserve_and_openai_latencies_both_hold_the_queue_and_the_client_lag() -> None:
    offsets_s = Arrivals(RATE_PER_S, "constant").offsets_s(count=REQUESTS)
    bound_ms = _queue_bound_ms(offsets_s)
    server = make_server(max_batch=1, max_queue=1000, options=[("null.latency_ms", "40"), ("null.wait", "sleep")])
    url = server.start()
    try:
        target = prepare_target(url)

        async def kserve() -> object:
            pool = ConnectionPool(target.base_url)
            try:
                return await run_server(pool, target.requests, RATE_PER_S, offsets_s[-1] + 1e-3, arrivals="constant")
            finally:
                await pool.aclose()

        run = run_async(lambda: _held_up(kserve))
    finally:
        server.stop()
    assert run.ok == run.issued == REQUESTS  # type: ignore[attr-defined]
    kserve_ms = np.asarray(run.latencies_ms)  # type: ignore[attr-defined]
    kserve_lag_ms = np.asarray(run.lag_ms)  # type: ignore[attr-defined]

    with FakeOpenAIServer(["ok"], tokens=4, delay_s=SERVICE_S / 4, slots=1) as fake:
        endpoint = EndpointSettings(fake.url, gen_len=4, requests=REQUESTS, request_timeout_s=30.0)
        arrivals = Arrivals(RATE_PER_S, "constant")
        timings = run_async(lambda: _held_up(lambda: run_openai_level(endpoint, arrivals=arrivals)))
    assert all(t.ok for t in timings) and len(timings) == REQUESTS
    # Each request's clock starts at its scheduled time: evenly spaced, whatever time the client sent it.
    np.testing.assert_allclose(np.diff([t.start_s for t in timings]), 1 / RATE_PER_S, atol=1e-6)
    openai_ms = np.asarray([(t.end_s - t.start_s) * 1e3 for t in timings])
    openai_lag_ms = np.asarray([t.lag_s * 1e3 for t in timings])

    for latencies_ms, lags_ms in ((kserve_ms, kserve_lag_ms), (openai_ms, openai_lag_ms)):
        # The first arrivals were due while the client was held up: their lag is reported ...
        assert lags_ms.max() >= 0.8 * HOLD_S * 1e3
        # ... and counted in their latency, with the queue's wait: a client timing from the send would report
        # less than the least a one-worker server can give from the schedule.
        assert latencies_ms.mean() >= bound_ms
        assert latencies_ms.max() >= HOLD_S * 1e3
