"""The stop rule: time a case in bursts until its median is known to the precision asked for.

A case stops when it has at least `min_iterations` samples and `min_time_s` of timed loop *and* the P50's 95%
interval lies within ±`target_ci` of the P50, or at `max_time_s` whatever it has. The interval used here is
the distribution-free order-statistic interval of the median (Conover 1999, §3.2), which costs a sort rather than
a bootstrap, so it can be checked after every burst; the reported interval (bootstrap,
`infermeter.figures.latency_stats`) agrees with it to within a sample or two at these sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from infermeter.core.case import MeasureSettings
from infermeter.figures.latency_stats import order_statistic_ci
from infermeter.results.schema import CaseWarning

# Sequential mode times a case in bursts of this length, checking the rule between them.
SEQUENTIAL_BURST_S = 0.25


@dataclass(frozen=True)
class StopState:
    """Where a case stands against the stop rule: its samples, timed seconds and the P50 interval's half-width
    relative to the P50. `stopped_by` is `rule`, `max_time`, or empty while it must go on."""

    iterations: int
    elapsed_s: float
    p50_halfwidth: float
    stopped_by: str


def median_halfwidth(samples: Sequence[float] | np.ndarray) -> float:
    """Half-width of the median's 95% order-statistic interval, relative to the median (inf below 6 samples,
    where no such interval exists)."""
    values = np.sort(np.asarray(samples, dtype=np.float64))
    if len(values) < 6:
        return math.inf
    low, high = order_statistic_ci(values, 50.0)
    median = float(np.median(values))
    if median <= 0:
        return math.inf
    return float(max(median - low, high - median) / median)


def stop_state(samples_ns: Sequence[int], elapsed_s: float, settings: MeasureSettings) -> StopState:
    """Judge `samples_ns` (all bursts so far) taken over `elapsed_s` seconds of timed loop against the rule."""
    n = len(samples_ns)
    halfwidth = median_halfwidth(samples_ns) if settings.target_ci > 0 else 0.0
    met = n >= settings.min_iterations and elapsed_s >= settings.min_time_s and halfwidth <= settings.target_ci
    stopped_by = "rule" if met else "max_time" if elapsed_s >= settings.max_time_s else ""
    return StopState(n, elapsed_s, halfwidth, stopped_by)


def max_time_warning(state: StopState, settings: MeasureSettings) -> CaseWarning | None:
    """The `max_time_reached` warning when --max-time stopped a case before its --iterations. A P50 interval
    still wider than --target-ci is not warned about: the table shows that P50 with its width (`483 ±6%`)."""
    if state.stopped_by != "max_time" or state.iterations >= settings.min_iterations:
        return None
    detail = f"{state.iterations} of {settings.min_iterations} iterations"
    return CaseWarning(
        "max_time_reached",
        f"stopped at --max-time {settings.max_time_s:g} s after {detail}: raise --max-time for the full count",
        detail,
    )


@dataclass(frozen=True)
class Burst:
    """One timed burst: every request's latency (ns) and the wall time of the burst's timed window (ns; with
    concurrent streams the latencies overlap, so their sum is not the time spent). `other_share`: the share of the
    usable CPUs other work took during it (`measure.interference`; 0 where not measured)."""

    samples_ns: list[int]
    wall_ns: int
    other_share: float = 0.0


class BurstSource(Protocol):
    """Anything that runs a case for one timed burst: a worker process or a case in this process."""

    def burst(self, min_s: float, max_s: float, min_iterations: int = 1) -> Burst:
        """Time the case until it has `min_iterations` samples and `min_s` seconds, or `max_s` seconds."""


@dataclass
class BurstLog:
    """A case's bursts so far, judged against the stop rule after each."""

    settings: MeasureSettings
    samples_ns: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    round_medians_ns: list[float] = field(default_factory=list)
    round_other_shares: list[float] = field(default_factory=list)  # other work's CPU share, per burst
    retired: bool = False  # a race (`decision_race`) dropped the case: the group stops timing it

    def add(self, burst: Burst) -> StopState:
        """Record one burst (its median kept as that round's) and return where the case stands."""
        self.samples_ns += burst.samples_ns
        self.elapsed_s += burst.wall_ns / 1e9
        self.round_medians_ns.append(float(np.median(burst.samples_ns)))
        self.round_other_shares.append(burst.other_share)
        return self.state()

    def state(self) -> StopState:
        """Where the case stands against the stop rule now."""
        return stop_state(self.samples_ns, self.elapsed_s, self.settings)


def run_until_stopped(source: BurstSource, settings: MeasureSettings) -> StopState:
    """Sequential mode: one burst for --iterations and --min-time (within --max-time), then bursts of
    SEQUENTIAL_BURST_S until the P50's interval meets --target-ci or --max-time is reached."""
    log = BurstLog(settings)
    state = log.add(source.burst(settings.min_time_s, settings.max_time_s, settings.min_iterations))
    while not state.stopped_by:
        remaining = settings.max_time_s - log.elapsed_s
        state = log.add(source.burst(SEQUENTIAL_BURST_S, max(0.0, min(SEQUENTIAL_BURST_S, remaining))))
    return state
