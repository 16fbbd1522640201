"""One arrivals schedule for every open-loop load: Poisson (exponential gaps, MLPerf LoadGen's server scenario) or
constant (evenly spaced), at a rate per second, seeded; and `paced`, which issues each arrival at its time.

The schedule is drawn before the run starts and never adapts to the server: a slow server builds a queue, as under
real traffic, and each request's latency counts from its scheduled time (`timing.Issue`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np

from infermeter.core.errors import UsageError
from infermeter.load.timing import Issue

ARRIVALS = ("poisson", "constant")
# Sleep through gaps longer than this; spin (yielding to the loop) through shorter ones: the loop's timers
# wake up to a millisecond late, and the target is a P99 scheduling lag under 1 ms.
_SPIN_WINDOW_NS = 2_000_000


@dataclass(frozen=True)
class Arrivals:
    """An open-loop schedule: `rate_per_s` arrivals per second, Poisson or constant, drawn from `seed`."""

    rate_per_s: float
    kind: str = "poisson"
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0:  # also refuses NaN
            raise UsageError(f"an arrival rate must be positive, not {self.rate_per_s:g} per second")
        if self.kind not in ARRIVALS:
            raise UsageError(f"arrivals {self.kind!r} is not one of {', '.join(ARRIVALS)}")

    def offsets_s(self, duration_s: float | None = None, count: int | None = None) -> np.ndarray:
        """Arrival offsets in seconds from the start: those before `duration_s`, or the first `count`."""
        if (duration_s is None) == (count is None):
            raise ValueError("give the schedule a duration or a count, not both")
        if count is None:
            assert duration_s is not None
            if duration_s <= 0:
                raise ValueError("duration_s must be positive")
            expected = self.rate_per_s * duration_s
            count = int(expected + 6 * np.sqrt(expected) + 16)
        gap_s = 1.0 / self.rate_per_s
        if self.kind == "constant":
            offsets = gap_s * np.arange(1, count + 1)
        else:
            rng = np.random.default_rng(self.seed)
            offsets = np.cumsum(rng.exponential(gap_s, count))
            while duration_s is not None and offsets[-1] < duration_s:  # astronomically rare: extend, never cut
                offsets = np.concatenate([offsets, offsets[-1] + np.cumsum(rng.exponential(gap_s, count))])
        return offsets if duration_s is None else offsets[offsets < duration_s]


def poisson_schedule(qps: float, duration_s: float, seed: int = 0) -> np.ndarray:
    """Arrival offsets (seconds from the start, < duration_s) of a Poisson process at `qps`."""
    if qps <= 0 or duration_s <= 0:
        raise ValueError("qps and duration_s must be positive")
    return Arrivals(qps, "poisson", seed).offsets_s(duration_s=duration_s)


async def paced(offsets_s: np.ndarray, start_ns: int | None = None) -> AsyncIterator[Issue]:
    """Yield one `Issue` per offset once its time has come (sleeping through long gaps, spinning through short
    ones); `start_ns` is the schedule's zero on `time.perf_counter_ns` (default: a millisecond from now, so that
    the first arrival is on time). A consumer that takes long between items shows as lag, never as a shift of
    the schedule."""
    if start_ns is None:
        start_ns = time.perf_counter_ns() + 1_000_000
    perf_counter_ns = time.perf_counter_ns
    for index, offset_ns in enumerate((offsets_s * 1e9).astype(np.int64).tolist()):
        due_ns = start_ns + offset_ns
        while True:
            now_ns = perf_counter_ns()
            wait_ns = due_ns - now_ns
            if wait_ns <= 0:
                break
            await asyncio.sleep((wait_ns - _SPIN_WINDOW_NS) / 1e9 if wait_ns > 2 * _SPIN_WINDOW_NS else 0)
        yield Issue(index, due_ns, now_ns)
