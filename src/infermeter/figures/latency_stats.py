"""Pure statistics over latency samples, and the closed set of warnings a measurement can carry.

Definitions (all over the steady-state samples; the first inference and warm-up are never included):
- pXX: the XX-th percentile by linear interpolation between order statistics (Hyndman & Fan 1996, type 7;
  numpy's default), so p50 is the median.
- std: sample standard deviation (ddof=1); cv = std / mean.
- p50_ci95 / p99_ci95: 95% percentile-bootstrap confidence intervals (Efron & Tibshirani 1993, ch. 13) with
  1000 resamples and a fixed seed. Above 20,000 samples the distribution-free order-statistic interval
  (Conover 1999, §3.2: ranks from the Binomial(n, q) 2.5% and 97.5% quantiles) is used instead: the two agree
  at such sizes, and the bootstrap would cost seconds.
- outliers: samples outside Tukey's fences, [Q1 - 1.5 IQR, Q3 + 1.5 IQR] (Tukey 1977).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from infermeter.results.schema import CaseWarning, LatencyStats

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_MAX_SAMPLES = 20_000

# Thresholds of the warnings below; each is a judgement call, stated here once.
HIGH_CV = 0.10  # a (robust) coefficient of variation above 10% makes single-digit speedups meaningless
MIN_TAIL_SAMPLES = 5  # a percentile q needs at least this many samples above it: n * (1 - q) >= 5
SLOW_FIRST_RUN_RATIO = 10.0
SLOW_FIRST_RUN_EXTRA_MS = 5.0  # below this the cold cost is not worth a warning, whatever the ratio
DRIFT_RATIO = 0.05
DRIFT_P_VALUE = 0.01

# Memory growth worth a warning: at least this many MB and this fraction of the starting RSS, with a significant
# positive trend (linear regression p-value below DRIFT_P_VALUE).
MEMORY_GROWTH_MB = 20.0
MEMORY_GROWTH_FRACTION = 0.05


def percentile(samples: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile (0..100), linear interpolation (type 7)."""
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q))


def order_statistic_ci(sorted_values: np.ndarray, q: float, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the q-th percentile of `sorted_values`: the order statistics whose ranks
    bound a Binomial(n, q/100) at `confidence`."""
    from scipy.stats import binom

    n = len(sorted_values)
    alpha = 1.0 - confidence
    low = int(binom.ppf(alpha / 2, n, q / 100))
    high = int(binom.ppf(1 - alpha / 2, n, q / 100))
    return float(sorted_values[max(low - 1, 0)]), float(sorted_values[min(high, n - 1)])


def quantile_ci95(samples: Sequence[float] | np.ndarray, q: float, seed: int = 0) -> tuple[float, float]:
    """95% confidence interval of the q-th percentile (see module docstring for the method)."""
    values = np.sort(np.asarray(samples, dtype=np.float64))
    n = len(values)
    if n < 2:
        only = float(values[0]) if n else math.nan
        return only, only
    if n > BOOTSTRAP_MAX_SAMPLES:
        return order_statistic_ci(values, q)
    rng = np.random.default_rng(seed)
    estimates = np.empty(BOOTSTRAP_RESAMPLES)
    # Chunks bound memory at about 16 MB whatever n is.
    chunk = max(1, 2_000_000 // n)
    for start in range(0, BOOTSTRAP_RESAMPLES, chunk):
        count = min(chunk, BOOTSTRAP_RESAMPLES - start)
        resamples = values[rng.integers(0, n, size=(count, n))]
        estimates[start : start + count] = np.percentile(resamples, q, axis=1)
    low, high = np.percentile(estimates, [2.5, 97.5])
    return float(low), float(high)


def count_outliers(samples: Sequence[float] | np.ndarray) -> int:
    """Samples outside Tukey's fences."""
    values = np.asarray(samples, dtype=np.float64)
    if len(values) < 4:
        return 0
    q1, q3 = np.percentile(values, [25, 75])
    fence = 1.5 * (q3 - q1)
    return int(np.count_nonzero((values < q1 - fence) | (values > q3 + fence)))


def latency_stats(samples_ms: Sequence[float] | np.ndarray, seed: int = 0) -> LatencyStats:
    """All latency statistics of a run (milliseconds in, milliseconds out)."""
    values = np.asarray(samples_ms, dtype=np.float64)
    if len(values) == 0:
        raise ValueError("latency_stats needs at least one sample")
    p50, p90, p95, p99, p999 = (float(v) for v in np.percentile(values, [50, 90, 95, 99, 99.9]))
    mean = float(values.mean())
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return LatencyStats(
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        p999=p999,
        mean=mean,
        std=std,
        min=float(values.min()),
        max=float(values.max()),
        cv=std / mean if mean > 0 else 0.0,
        p50_ci95=quantile_ci95(values, 50, seed),
        p99_ci95=quantile_ci95(values, 99, seed),
        outliers=count_outliers(values),
        count=len(values),
    )


def replicate_p50(medians_ms: Sequence[float], confidence: float = 0.95) -> tuple[float, tuple[float, float]]:
    """The P50 of a case measured in several processes (`bench --repeat`), from each process's median: their
    geometric mean, and its Student-t interval on the log medians (the processes are the replicates; the samples
    of one process share its state and would understate the spread). Needs at least two medians."""
    from scipy.stats import t

    logs = np.log(np.asarray(medians_ms, dtype=np.float64))
    if len(logs) < 2:
        raise ValueError("replicate_p50 needs at least two process medians")
    centre = float(logs.mean())
    half = float(t.ppf(0.5 + confidence / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs)))
    return math.exp(centre), (math.exp(centre - half), math.exp(centre + half))


def robust_cv(samples: Sequence[float] | np.ndarray) -> float:
    """1.4826 × median absolute deviation / median: the CV of a normal distribution, but blind to a handful of
    outliers (a preempted iteration), which the plain CV lets dominate. What `high_cv` judges."""
    values = np.asarray(samples, dtype=np.float64)
    if len(values) < 2:
        return 0.0
    median = float(np.median(values))
    return 1.4826 * float(np.median(np.abs(values - median))) / median if median > 0 else 0.0


def min_samples_for(q: float) -> int:
    """How many samples percentile q (0..100) needs before it is reported without a warning."""
    return math.ceil(MIN_TAIL_SAMPLES / (1 - q / 100) - 1e-9)


def assess_run(
    samples_ms: Sequence[float] | np.ndarray,
    stats: LatencyStats,
    first_inference_ms: float | None,
    reported_percentiles: Sequence[float] = (99,),
    interleaved: bool = False,
    spread_samples: Sequence[float] | np.ndarray | None = None,
) -> list[CaseWarning]:
    """Warnings about the trustworthiness of one run, each with its remedy. An interleaved case is not checked for
    drift: its samples come from rounds spread over the whole group's run, the machine's drift hits every case of
    the group alike and cancels in the paired speedups, and the machine-speed probe reports it once.
    `spread_samples` are what `high_cv` judges (default: the samples themselves)."""
    warnings: list[CaseWarning] = []
    n = len(samples_ms)
    spread = robust_cv(samples_ms if spread_samples is None else spread_samples)
    if spread > HIGH_CV:
        warnings.append(
            CaseWarning(
                "high_cv",
                f"latency varies a lot (robust CV {spread:.0%}): close other programs, keep --threads at or below "
                "the physical cores, or raise --min-time; small speedups are not meaningful at this noise level",
                f"robust CV {spread:.0%}",
            )
        )
    for q in reported_percentiles:
        needed = min_samples_for(q)
        if n < needed:
            warnings.append(
                CaseWarning(
                    "too_few_samples",
                    f"P{q:g} from {n} samples rests on fewer than {MIN_TAIL_SAMPLES} samples beyond it; "
                    f"run at least {needed} iterations (--iterations {needed}) for a stable P{q:g}",
                    f"P{q:g} from {n} samples",
                )
            )
    if (
        first_inference_ms is not None
        and first_inference_ms > SLOW_FIRST_RUN_RATIO * stats.p50
        and first_inference_ms - stats.p50 > SLOW_FIRST_RUN_EXTRA_MS
    ):
        warnings.append(
            CaseWarning(
                "slow_first_run",
                f"the first inference took {first_inference_ms:.1f} ms, {first_inference_ms / stats.p50:.0f}x the "
                "median: every new process pays this once; warm services up before they take traffic",
                f"first {first_inference_ms:.1f} ms vs P50 {stats.p50:.2f} ms",
            )
        )
    drift = None if interleaved else detect_drift(samples_ms)
    if drift is not None:
        first, second = drift
        warnings.append(
            CaseWarning(
                "drift",
                f"median latency moved from {first:.3f} ms (first half) to {second:.3f} ms (second half): "
                "thermal throttling, frequency scaling or background load; raise --warmup, rerun on an idle machine",
                f"{first:.3f} → {second:.3f} ms",
            )
        )
    return warnings


def detect_drift(samples_ms: Sequence[float] | np.ndarray) -> tuple[float, float] | None:
    """(first-half median, second-half median) when they differ by more than DRIFT_RATIO and a Mann–Whitney U
    test says the difference is significant at DRIFT_P_VALUE; else None."""
    values = np.asarray(samples_ms, dtype=np.float64)
    if len(values) < 20:
        return None
    half = len(values) // 2
    first, second = values[:half], values[half:]
    m1, m2 = float(np.median(first)), float(np.median(second))
    if abs(m2 - m1) <= DRIFT_RATIO * min(m1, m2):
        return None
    from scipy.stats import mannwhitneyu

    if mannwhitneyu(first, second, alternative="two-sided").pvalue >= DRIFT_P_VALUE:
        return None
    return m1, m2


def precision_warning(requested: str, effective: str | None) -> CaseWarning | None:
    """A warning when the engine computes in another precision than the one requested."""
    if effective is None or effective == requested:
        return None
    return CaseWarning(
        "precision_not_requested",
        f"requested {requested} but the engine runs {effective}: its speed is not a {requested} figure; "
        "compare it only with other cases that run " + effective,
        f"{requested} → {effective}",
    )


def detect_memory_growth(times_s: Sequence[float], rss_mb: Sequence[float]) -> tuple[float, float] | None:
    """(growth in MB from the first to the last tenth of the run, slope in MB/s) when RSS grows steadily; else None.

    Growth is the median of the last 10% of samples minus the median of the first 10%; steadiness is a
    least-squares slope that is positive and significant (scipy.stats.linregress, p < DRIFT_P_VALUE)."""
    count = len(rss_mb)
    if count < 20:
        return None
    tenth = max(2, count // 10)
    start, end = float(np.median(rss_mb[:tenth])), float(np.median(rss_mb[-tenth:]))
    growth = end - start
    if growth < MEMORY_GROWTH_MB or growth < MEMORY_GROWTH_FRACTION * start:
        return None
    from scipy.stats import linregress

    fit = linregress(np.asarray(times_s, dtype=np.float64), np.asarray(rss_mb, dtype=np.float64))
    if fit.slope <= 0 or fit.pvalue >= DRIFT_P_VALUE:
        return None
    return growth, float(fit.slope)


def memory_growth_warning(times_s: Sequence[float], rss_mb: Sequence[float]) -> CaseWarning | None:
    """The `memory_growth` warning for an RSS timeline, or None."""
    found = detect_memory_growth(times_s, rss_mb)
    if found is None:
        return None
    growth, slope = found
    return CaseWarning(
        "memory_growth",
        f"resident memory grew by {growth:.0f} MB during the run ({slope:.1f} MB/s): allocator fragmentation under "
        "varying shapes is a known production failure; pad inputs into a few --buckets or cap the shape range",
        f"+{growth:.0f} MB",
    )
