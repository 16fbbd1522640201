"""The one load generator with any protocol client (`load.client.LoadClient`): a closed loop at a concurrency for a
request count keeps that many in flight and schedules each when sent (lag 0); an open loop for a count follows its
arrivals; the drain deadline counts what never answered. A client here answers on the event loop's timer after a
set delay, so the generator's own bookkeeping is what is checked (the protocols: test_latency_definition.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np

from infermeter.load.arrivals import Arrivals
from infermeter.load.generator import closed_loop, open_loop, run_async
from infermeter.load.timing import Issue


class TimerClient:
    """Answers each request `delay_s` after it was sent (never, for the indices in `lost`), with its send time."""

    def __init__(self, delay_s: float, lost: frozenset[int] = frozenset()) -> None:
        self.delay_s = delay_s
        self.lost = lost
        self.in_flight = 0
        self.most_in_flight = 0

    def send(self, issue: Issue, done: Callable[[Issue, int, int], None]) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if issue.index in self.lost:
            return
        sent_ns = time.perf_counter_ns()

        def answer() -> None:
            self.in_flight -= 1
            done(issue, sent_ns, time.perf_counter_ns())

        asyncio.get_running_loop().call_later(self.delay_s, answer)


def test_closed_loop_keeps_the_concurrency_until_the_count_and_has_no_lag() -> None:
    client = TimerClient(0.01)
    traffic = run_async(lambda: closed_loop(client, 3, requests=10, drain_timeout_s=None))
    assert traffic.issued == len(traffic.answers) == 10 and traffic.unanswered == 0
    assert client.most_in_flight == 3
    assert sorted(issue.index for issue, _, _ in traffic.answers) == list(range(10))
    assert all(issue.lag_ns == 0 for issue, _, _ in traffic.answers)  # scheduled when sent
    # Each answer is at least the delay after its scheduled time: latency counts from the schedule (less uvloop's
    # 1 ms timer resolution: run_async runs on uvloop where it is installed, and its timers may fire that early).
    assert min(issue.latency_ms(done_ns) for issue, _, done_ns in traffic.answers) >= 9.0
    # 10 requests, 3 at a time, 10 ms each: at least 4 rounds (less the timers' 1 ms resolution, each round).
    assert traffic.elapsed_s >= 0.036


def test_open_loop_for_a_count_follows_the_arrivals() -> None:
    arrivals = Arrivals(200.0, "constant")
    traffic = run_async(lambda: open_loop(TimerClient(0.005), arrivals, requests=12, drain_timeout_s=None))
    assert traffic.issued == len(traffic.answers) == 12
    np.testing.assert_allclose(traffic.scheduled_s, arrivals.offsets_s(count=12))
    issues = sorted((issue for issue, _, _ in traffic.answers), key=lambda issue: issue.index)
    np.testing.assert_allclose(np.diff([issue.scheduled_ns for issue in issues]) / 1e9, 1 / 200.0, atol=1e-6)
    assert len(traffic.lag_ms) == 12 and min(traffic.lag_ms) >= 0


def test_requests_never_answered_are_counted_at_the_drain_deadline() -> None:
    client = TimerClient(0.005, lost=frozenset({1, 4}))
    traffic = run_async(lambda: closed_loop(client, 2, duration_s=0.1, drain_timeout_s=0.05))
    assert traffic.unanswered == 2 and len(traffic.answers) == traffic.issued - 2


def test_a_request_the_openai_client_cannot_classify_is_counted_not_waited_for() -> None:
    """An exception the stream reader does not know (here: an HTTP client without `stream`) is the request's
    `client_error`: the closed loop ends with every request answered instead of waiting on a lost one."""
    from infermeter.llm.openai_bench import EndpointSettings
    from infermeter.llm.openai_client import OpenAIClient

    client = OpenAIClient(object(), EndpointSettings("http://127.0.0.1:1"))
    traffic = run_async(lambda: closed_loop(client, 2, requests=4, drain_timeout_s=None))
    assert traffic.issued == len(traffic.answers) == 4
    assert {timing.error_kind for _, timing, _ in traffic.answers} == {"client_error"}
    assert all("AttributeError" in (timing.error or "") for _, timing, _ in traffic.answers)
