"""Statistics against hand-computed values, and the bootstrap CI's coverage on a known distribution."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.figures import latency_stats as stats
from infermeter.figures.warning_codes import WARNING_CODES


def test_percentiles_follow_linear_interpolation() -> None:
    samples = [1.0, 2.0, 3.0, 4.0, 10.0]
    # Type 7: position (n-1)*q = 4*0.9 = 3.6 -> 4 + 0.6*(10-4) = 7.6
    assert stats.percentile(samples, 90) == pytest.approx(7.6)
    result = stats.latency_stats(samples)
    assert result.p50 == 3.0
    assert result.mean == 4.0
    # sample std with ddof=1: sqrt(((9+4+1+0+36)/4)) = sqrt(12.5)
    assert result.std == pytest.approx(np.sqrt(12.5))
    assert result.cv == pytest.approx(np.sqrt(12.5) / 4.0)
    assert (result.min, result.max, result.count) == (1.0, 10.0, 5)


def test_outliers_use_tukey_fences() -> None:
    # Q1=2, Q3=4 (type 7 on 1..5 pattern) -> fences [-1, 7]; 100 is the only outlier
    samples = [1.0, 2.0, 3.0, 4.0, 5.0, 2.0, 3.0, 4.0, 3.0, 100.0]
    q1, q3 = np.percentile(samples, [25, 75])
    expected = sum(1 for s in samples if s < q1 - 1.5 * (q3 - q1) or s > q3 + 1.5 * (q3 - q1))
    assert stats.count_outliers(samples) == expected == 1


def test_single_sample_has_degenerate_interval() -> None:
    result = stats.latency_stats([5.0])
    assert result.p50_ci95 == (5.0, 5.0)
    assert result.std == 0.0


def test_bootstrap_ci_covers_true_median_about_95_percent() -> None:
    # Exponential(1): true median ln 2. 200 trials of n=200; the coverage of a 95% interval should be near 0.95.
    rng = np.random.default_rng(7)
    true_median = np.log(2)
    covered = 0
    trials = 200
    for trial in range(trials):
        low, high = stats.quantile_ci95(rng.exponential(1.0, 200), 50, seed=trial)
        covered += low <= true_median <= high
    assert 0.89 <= covered / trials <= 0.99


def test_large_samples_use_order_statistic_interval_which_contains_the_estimate() -> None:
    rng = np.random.default_rng(1)
    values = rng.lognormal(0, 0.3, stats.BOOTSTRAP_MAX_SAMPLES + 1000)
    low, high = stats.quantile_ci95(values, 99)
    assert low <= np.percentile(values, 99) <= high
    assert high - low < 0.2 * np.percentile(values, 99)


def test_min_samples_for_percentiles() -> None:
    assert stats.min_samples_for(99) == 500
    assert stats.min_samples_for(50) == 10


def test_assess_run_flags_noise_few_samples_and_slow_first_run() -> None:
    rng = np.random.default_rng(0)
    noisy = rng.lognormal(0, 0.5, 100)
    result = stats.latency_stats(noisy)
    codes = {w.code for w in stats.assess_run(noisy, result, first_inference_ms=100 * result.p50 + 10)}
    assert {"high_cv", "too_few_samples", "slow_first_run"} <= codes
    steady = np.full(1000, 2.0) + rng.normal(0, 0.01, 1000)
    result = stats.latency_stats(steady)
    assert stats.assess_run(steady, result, first_inference_ms=2.5) == []


def test_drift_detected_only_when_large_and_significant() -> None:
    rng = np.random.default_rng(3)
    flat = rng.normal(10, 0.2, 400)
    assert stats.detect_drift(flat) is None
    ramp = np.concatenate([rng.normal(10, 0.2, 200), rng.normal(12, 0.2, 200)])
    drift = stats.detect_drift(ramp)
    assert drift is not None and drift[0] == pytest.approx(10, abs=0.1) and drift[1] == pytest.approx(12, abs=0.1)


def test_precision_warning() -> None:
    assert stats.precision_warning("fp32", "fp32") is None
    warning = stats.precision_warning("fp32", "bf16")
    assert warning is not None and warning.code == "precision_not_requested"
    assert set(WARNING_CODES) >= {"high_cv", "too_few_samples", "slow_first_run", "drift", "precision_mismatch"}
