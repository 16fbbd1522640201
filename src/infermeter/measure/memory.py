"""Resident memory through a run: a background sampler for dynamic-shape and multi-stream runs.

Varying shapes can fragment an allocator so that memory grows steadily in production; sampling RSS every
`interval_s` makes that visible. The sampler wakes briefly (microseconds) every interval, so it is used only
where memory over time is asked for, never in the plain static loop.
"""

from __future__ import annotations

import threading
import time

import psutil


class RssSampler:
    """Samples this process's RSS (MB) with timestamps (s since start) until stopped; a context manager."""

    def __init__(self, interval_s: float = 0.05) -> None:
        self.interval_s = interval_s
        self.times_s: list[float] = []
        self.rss_mb: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._process = psutil.Process()

    def _run(self) -> None:
        start = time.perf_counter()
        while True:
            self.times_s.append(time.perf_counter() - start)
            self.rss_mb.append(self._process.memory_info().rss / 2**20)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def timeline(self, max_points: int = 200) -> list[list[float]]:
        """[[t_s, rss_mb], ...] thinned to at most `max_points` evenly spaced points (ends kept)."""
        count = len(self.times_s)
        if count == 0:
            return []
        step = max(1, (count + max_points - 1) // max_points)
        picks = list(range(0, count, step))
        if picks[-1] != count - 1:
            picks.append(count - 1)
        return [[round(self.times_s[i], 3), round(self.rss_mb[i], 2)] for i in picks]
