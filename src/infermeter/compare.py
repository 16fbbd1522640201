"""Compare two results files case by case: ratio with a bootstrap confidence interval, a significance test, and a
verdict that a CI gate can trust (a noisy machine must not fail the build on noise). Pure: no printing.

Method, per paired case and metric:
- ratio = statistic(new samples) / statistic(base samples), where the statistic is the median (p50), the 99th
  percentile (p99) or batch × 1000 / mean latency (throughput, inferences/s, from the same raw samples).
- ratio_ci95: percentile bootstrap (Efron & Tibshirani 1993, ch. 13): both sample sets resampled independently
  with replacement, BOOTSTRAP_RESAMPLES times, fixed seed; the 2.5% and 97.5% quantiles of the resampled ratios.
- p_value: two-sided Mann–Whitney U test (Mann & Whitney 1947) on the raw samples (scipy).
- significant: for p50 and throughput, p_value < alpha AND the CI excludes 1; for p99 the CI alone decides
  (the U test compares whole distributions and can miss a change confined to the tail).
- regression: significant, slower, and slower by more than the threshold. Only regressions fail a CI gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from infermeter.results.env import environment_differences
from infermeter.results.schema import CaseResult, ResultsFile

METRICS = ("p50", "p99", "throughput")
BOOTSTRAP_RESAMPLES = 1000
# Larger sample sets are subsampled (without replacement, fixed seed) before the bootstrap: the interval is as
# good for any practical purpose and the comparison stays under a second per case.
MAX_BOOTSTRAP_SAMPLES = 5000
DEFAULT_ALPHA = 0.01
DEFAULT_THRESHOLD = 0.05
# Below this many samples a P99 rests on fewer than 5 samples beyond it (see stats.min_samples_for).
MIN_P99_SAMPLES = 500


@dataclass(frozen=True)
class CaseChange:
    """One paired case. `ratio` is new/base of the metric; `slowdown` > 1 means the new run is slower whatever the
    metric (for throughput it is base/new). `verdict` is faster, slower, not significant, precision differs or
    no data."""

    label: str
    base: CaseResult
    new: CaseResult
    paired_by: str  # "id" or "variables" (same model/backend/precision/batch/shape/threads, other options)
    metric: str
    base_value: float | None = None
    new_value: float | None = None
    ratio: float | None = None
    ratio_ci95: tuple[float, float] | None = None
    p_value: float | None = None
    significant: bool = False
    beyond_threshold: bool = False
    verdict: str = "no data"
    notes: list[str] = field(default_factory=list)

    @property
    def slowdown(self) -> float | None:
        """How many times slower the new run is (> 1 slower, < 1 faster), whichever the metric."""
        if self.ratio is None:
            return None
        return 1.0 / self.ratio if self.metric == "throughput" else self.ratio

    @property
    def regression(self) -> bool:
        """Significant, slower, and beyond the threshold: what fails a CI gate."""
        return self.verdict == "slower" and self.beyond_threshold


@dataclass(frozen=True)
class Comparison:
    """The whole comparison: paired changes, cases present on one side only, environment differences."""

    metric: str
    threshold: float
    alpha: float
    changes: list[CaseChange]
    only_base: list[CaseResult]
    only_new: list[CaseResult]
    env_differences: list[str]

    @property
    def regressions(self) -> list[CaseChange]:
        """The changes that fail the gate."""
        return [c for c in self.changes if c.regression]


def statistic(samples: np.ndarray, metric: str, batch: int) -> float:
    """The metric of one sample set (milliseconds in; ms for p50/p99, inferences/s for throughput)."""
    if metric == "p50":
        return float(np.median(samples))
    if metric == "p99":
        return float(np.percentile(samples, 99))
    return batch * 1000.0 / float(np.mean(samples))


def _batched_statistic(resamples: np.ndarray, metric: str, batch: int) -> np.ndarray:
    if metric == "p50":
        return np.median(resamples, axis=1)
    if metric == "p99":
        return np.percentile(resamples, 99, axis=1)
    return batch * 1000.0 / resamples.mean(axis=1)


def bootstrap_ratio_ci(
    base: np.ndarray, new: np.ndarray, metric: str, batch_base: int, batch_new: int, seed: int = 0
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of statistic(new) / statistic(base)."""
    rng = np.random.default_rng(seed)
    base = _subsample(base, rng)
    new = _subsample(new, rng)
    ratios = np.empty(BOOTSTRAP_RESAMPLES)
    chunk = max(1, 2_000_000 // max(len(base), len(new)))
    for start in range(0, BOOTSTRAP_RESAMPLES, chunk):
        count = min(chunk, BOOTSTRAP_RESAMPLES - start)
        b = _batched_statistic(base[rng.integers(0, len(base), (count, len(base)))], metric, batch_base)
        n = _batched_statistic(new[rng.integers(0, len(new), (count, len(new)))], metric, batch_new)
        ratios[start : start + count] = n / b
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def _subsample(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if len(values) <= MAX_BOOTSTRAP_SAMPLES:
        return values
    return rng.choice(values, MAX_BOOTSTRAP_SAMPLES, replace=False)


def _label(case: CaseResult) -> str:
    return f"{case.model} {case.backend} {case.precision} b{case.batch} {case.shape_mode} t{case.threads}"


def _variables(case: CaseResult) -> tuple[object, ...]:
    return (case.model, case.backend, case.precision, case.batch, case.shape_mode, case.threads)


def pair_cases(
    base: Sequence[CaseResult], new: Sequence[CaseResult]
) -> tuple[list[tuple[CaseResult, CaseResult, str]], list[CaseResult], list[CaseResult]]:
    """Pairs by case id (the id encodes every controlled variable and option); then the leftovers by (model,
    backend, precision, batch, shape mode, threads) where that key is unique on both sides. Returns
    (pairs with how they were paired, unpaired base cases, unpaired new cases)."""
    new_by_id = {c.id: c for c in new}
    pairs: list[tuple[CaseResult, CaseResult, str]] = []
    left_base = []
    used: set[str] = set()
    for case in base:
        match = new_by_id.get(case.id)
        if match is not None and case.id not in used:
            pairs.append((case, match, "id"))
            used.add(case.id)
        else:
            left_base.append(case)
    left_new = [c for c in new if c.id not in used]
    keys_base = [_variables(c) for c in left_base]
    keys_new = [_variables(c) for c in left_new]
    still_base = []
    for case, key in zip(left_base, keys_base, strict=True):
        if keys_base.count(key) == 1 and keys_new.count(key) == 1:
            match = left_new[keys_new.index(key)]
            pairs.append((case, match, "variables"))
        else:
            still_base.append(case)
    paired_new = {id(n) for _, n, _ in pairs}
    return pairs, still_base, [c for c in left_new if id(c) not in paired_new]


def compare_cases(
    base: CaseResult,
    new: CaseResult,
    metric: str = "p50",
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    paired_by: str = "id",
    allow_mixed_precision: bool = False,
    seed: int = 0,
) -> CaseChange:
    """The change of one metric between two measurements of the same case."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    label = _label(new)
    notes = []
    if paired_by == "variables":
        notes.append("paired by controlled variables: backend options or input shapes differ between the runs")
    if not (base.ok and new.ok and base.samples_ms and new.samples_ms):
        status = f"base {base.status}, new {new.status}"
        return CaseChange(label, base, new, paired_by, metric, verdict="no data", notes=[*notes, status])
    if base.precision_effective != new.precision_effective:
        text = f"effective precision {base.precision_effective} vs {new.precision_effective}"
        if not allow_mixed_precision:
            return CaseChange(label, base, new, paired_by, metric, verdict="precision differs", notes=[*notes, text])
        notes.append(text + " (compared anyway: --allow-mixed-precision)")
    b = np.asarray(base.samples_ms, dtype=np.float64)
    n = np.asarray(new.samples_ms, dtype=np.float64)
    base_value = statistic(b, metric, base.batch)
    new_value = statistic(n, metric, new.batch)
    ratio = new_value / base_value
    low, high = bootstrap_ratio_ci(b, n, metric, base.batch, new.batch, seed)
    from scipy.stats import mannwhitneyu

    p_value = float(mannwhitneyu(b, n, alternative="two-sided").pvalue)
    excludes_one = low > 1.0 or high < 1.0
    significant = excludes_one if metric == "p99" else excludes_one and p_value < alpha
    if metric == "p99" and min(len(b), len(n)) < MIN_P99_SAMPLES:
        notes.append(f"P99 from fewer than {MIN_P99_SAMPLES} samples: its interval is wide")
    slowdown = 1.0 / ratio if metric == "throughput" else ratio
    beyond = slowdown > 1.0 + threshold or slowdown < 1.0 / (1.0 + threshold)
    if not significant:
        verdict = "not significant"
    else:
        verdict = "slower" if slowdown > 1.0 else "faster"
        if not beyond:
            notes.append(f"within the {threshold:.0%} threshold")
    return CaseChange(
        label,
        base,
        new,
        paired_by,
        metric,
        base_value,
        new_value,
        ratio,
        (low, high),
        p_value,
        significant,
        beyond,
        verdict,
        notes,
    )


def compare_results(
    base: ResultsFile,
    new: ResultsFile,
    metric: str = "p50",
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    allow_mixed_precision: bool = False,
) -> Comparison:
    """Compare every paired case of two results files."""
    pairs, only_base, only_new = pair_cases(base.cases, new.cases)
    changes = [
        compare_cases(b, n, metric, threshold, alpha, how, allow_mixed_precision, seed=i)
        for i, (b, n, how) in enumerate(pairs)
    ]
    return Comparison(
        metric,
        threshold,
        alpha,
        changes,
        only_base,
        only_new,
        environment_differences(base.environment, new.environment),
    )


def parse_threshold(text: str) -> float:
    """`5%`, `5` or `0.05` -> 0.05 (a bare number above 1 is read as percent). ValueError when not a number."""
    text = text.strip()
    value = float(text.removesuffix("%"))
    if text.endswith("%") or value > 1:
        value /= 100
    if value < 0:
        raise ValueError("threshold must not be negative")
    return value
