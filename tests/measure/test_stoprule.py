"""The stop rule: precision of the P50, not fixed counts."""

from __future__ import annotations

import math

import numpy as np

from infermeter.core.case import MeasureSettings
from infermeter.measure.stoprule import Burst, max_time_warning, median_halfwidth, run_until_stopped


class FakeSource:
    """Bursts of samples drawn around 1 ms with a given spread; each burst's wall time is its samples' sum."""

    def __init__(self, sigma: float) -> None:
        self.rng = np.random.default_rng(1)
        self.sigma = sigma
        self.bursts = 0

    def burst(self, min_s: float, max_s: float, min_iterations: int = 1) -> Burst:
        self.bursts += 1
        wanted = max(min_iterations, int(max(min_s, 0.01) / 1e-3) + 5)
        count = max(1, min(wanted, int(max_s / 1e-3) + 1))  # --max-time wins, as in the real loop
        samples = [int(1e6 * v) for v in self.rng.lognormal(0, self.sigma, count)]
        return Burst(samples, sum(samples))


def test_the_median_interval_narrows_with_samples() -> None:
    rng = np.random.default_rng(0)
    assert math.isinf(median_halfwidth([1.0, 2.0]))
    assert median_halfwidth(rng.lognormal(0, 0.1, 100)) > median_halfwidth(rng.lognormal(0, 0.1, 10_000))


def test_a_steady_case_stops_after_its_minimums() -> None:
    settings = MeasureSettings(min_iterations=50, min_time_s=0.2, max_time_s=10.0, target_ci=0.01)
    source = FakeSource(sigma=0.001)
    state = run_until_stopped(source, settings)
    assert state.stopped_by == "rule" and source.bursts == 1 and state.iterations >= 50


def test_a_noisy_case_runs_on_until_its_interval_meets_the_target() -> None:
    settings = MeasureSettings(min_iterations=10, min_time_s=0.05, max_time_s=30.0, target_ci=0.01)
    source = FakeSource(sigma=0.2)
    state = run_until_stopped(source, settings)
    assert state.stopped_by == "rule" and source.bursts > 1 and state.p50_halfwidth <= 0.01
    assert max_time_warning(state, settings) is None


def test_max_time_stops_a_case_and_warns_only_when_iterations_fell_short() -> None:
    settings = MeasureSettings(min_iterations=10, min_time_s=0.05, max_time_s=0.5, target_ci=0.001)
    state = run_until_stopped(FakeSource(sigma=0.3), settings)
    assert state.stopped_by == "max_time" and state.elapsed_s >= 0.5 and state.p50_halfwidth > 0.001
    assert max_time_warning(state, settings) is None  # a wide P50 interval is marked in the table instead
    counted = MeasureSettings(min_iterations=100_000, min_time_s=0.05, max_time_s=0.5, target_ci=0.001)
    warning = max_time_warning(run_until_stopped(FakeSource(sigma=0.3), counted), counted)
    assert warning is not None and "of 100000 iterations" in warning.message


def test_no_precision_target_means_counts_and_time_alone() -> None:
    settings = MeasureSettings(min_iterations=20, min_time_s=0.0, max_time_s=5.0, target_ci=0.0)
    state = run_until_stopped(FakeSource(sigma=0.5), settings)
    assert state.stopped_by == "rule" and state.iterations == 20
