"""One timing record, one meaning of latency for every load client.

A request of an open-loop run has a scheduled send time (from `arrivals`) and an actual one. Its latency runs from
the SCHEDULED time to its answer, so a client or connection pool that falls behind cannot hide the wait (no
coordinated omission); the client's own lag, actual minus scheduled, is reported beside it. In a closed loop the
next request is scheduled when it is sent, and the lag is zero.

All times are on `time.perf_counter_ns` (the same clock as `time.perf_counter`, which the OpenAI client reads).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)  # one per request: slots keep it cheap at thousands of requests per second
class Issue:
    """One request's send: its index in the run, its scheduled and its actual send time (ns)."""

    index: int
    scheduled_ns: int
    sent_ns: int

    @classmethod
    def now(cls, index: int) -> Issue:
        """A closed-loop send: scheduled when sent."""
        now_ns = time.perf_counter_ns()
        return cls(index, now_ns, now_ns)

    @property
    def scheduled_s(self) -> float:
        """The scheduled time in seconds on `time.perf_counter`'s clock."""
        return self.scheduled_ns / 1e9

    @property
    def lag_ns(self) -> int:
        """How late the client sent it."""
        return self.sent_ns - self.scheduled_ns

    def latency_ms(self, done_ns: int) -> float:
        """Milliseconds from the scheduled time to `done_ns` (the answer, or its last byte)."""
        return (done_ns - self.scheduled_ns) / 1e6


@dataclass(frozen=True)
class LagStats:
    """The client's scheduling lag over a run, in milliseconds."""

    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, lags_ms: list[float] | np.ndarray) -> LagStats | None:
        """The lag figures of a run's requests; None when it had none."""
        if len(lags_ms) == 0:
            return None
        values = np.asarray(lags_ms, dtype=float)
        return cls(float(np.percentile(values, 50)), float(np.percentile(values, 99)), float(values.max()))
