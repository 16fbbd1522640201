"""The machine-speed probe: one short fixed workload, timed before and after a sweep and between rounds.

A VM's share of the hardware moves (benchmarks/machine_stability.py saw 32% here over tens of seconds), and a
comparison of cases measured at different times inherits that. The probe does not correct anything: it says how
much the machine itself moved while the figures were taken.

The workload is elementwise numpy arithmetic on arrays that stay in the L1/L2 caches: single-threaded whatever
BLAS is installed (so it never competes with the parked workers' thread pools), free of any framework, and about
20 ms long. The best of a few repetitions is kept: the fastest is what the hardware gave when undisturbed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

_ELEMENTS = 8192
_INNER = 200
_REPEATS = 5


def probe_speed() -> float:
    """Operations per second of the fixed workload (best of a few repetitions); about 20 ms."""
    x = np.linspace(0.5, 1.5, _ELEMENTS)
    y = np.linspace(1.5, 0.5, _ELEMENTS)
    out = np.empty_like(x)
    best_s = float("inf")
    for _ in range(_REPEATS):
        start = time.perf_counter()
        for _ in range(_INNER):
            np.multiply(x, y, out=out)
            np.add(out, x, out=out)
        best_s = min(best_s, time.perf_counter() - start)
    return 2 * _ELEMENTS * _INNER / best_s


@dataclass
class SpeedTrace:
    """Probe readings over a run: (seconds since the first reading, operations per second)."""

    readings: list[tuple[float, float]] = field(default_factory=list)
    _start: float | None = None

    def read(self) -> float:
        """Take one reading now."""
        now = time.perf_counter()
        if self._start is None:
            self._start = now
        speed = probe_speed()
        self.readings.append((now - self._start, speed))
        return speed

    @property
    def moved(self) -> float | None:
        """How far the machine's speed moved: fastest / slowest reading - 1, or the 90th / 10th percentile - 1
        from 10 readings on, so that one preempted reading does not stand for the run (None below two)."""
        speeds = [speed for _, speed in self.readings]
        if len(speeds) < 2:
            return None
        if len(speeds) < 10:
            return max(speeds) / min(speeds) - 1
        low, high = np.percentile(speeds, [10, 90])
        return float(high / low - 1)

    def to_dict(self) -> dict[str, object]:
        """The trace as a results-file block."""
        return {
            "probe": f"numpy multiply-add on {_ELEMENTS} float64, best of {_REPEATS}",
            "readings": [[round(t, 3), round(s)] for t, s in self.readings],
            "moved": None if self.moved is None else round(self.moved, 4),
        }
