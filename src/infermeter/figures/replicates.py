"""Replicate-level statistics for `compare`: what a results file says about a case's run-to-run noise. Pure.

A timed iteration is not a replicate: the iterations of one run share that run's machine state (frequency, cache
and memory contention, the neighbours of a VM), so testing raw samples against each other reads any change of
the machine between two runs as a highly significant change of the code (pseudo-replication; Kalibera & Jones,
"Rigorous benchmarking in reasonable time", ISMM 2013). The replicates here are the case's per-round medians
(`CaseResult.timing.rounds_p50_ms`, from interleaved rounds), one number per round; or, when both files ran their
cases in several fresh processes (`bench --repeat N`), each process's median (`process_replicates`): the rounds of one
process share its state too (memory layout, thread placement, what the engine chose at start-up), so between two
runs a process-level effect is the noise the test must see.

The test is Welch's t-test (Welch 1947) on the logarithms of the two sides' replicate medians, and the interval
is the matching Student-t interval on the difference of their means, exponentiated: a 95% interval on the ratio
of the two geometric means. Logs because latency changes are multiplicative and their spread grows with the
level; Welch because the two runs need not be equally noisy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infermeter.results.schema import CaseResult

MIN_REPLICATES = 2
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Replicates:
    """A case's replicate medians in ms: `kind` is `processes` (one per fresh process, `bench --repeat`), `rounds`
    (interleaved rounds of one run) or `none` (a single run with no rounds: its P50 alone, which says nothing about
    the noise between runs)."""

    kind: str
    medians_ms: tuple[float, ...]

    @property
    def replicated(self) -> bool:
        """True when there are enough replicates to estimate their spread."""
        return len(self.medians_ms) >= MIN_REPLICATES

    @property
    def log_sd(self) -> float | None:
        """Sample standard deviation of the log medians (≈ their relative spread); None when unreplicated."""
        if not self.replicated:
            return None
        return float(np.std(np.log(self.medians_ms), ddof=1))


def replicates_of(case: CaseResult) -> Replicates:
    """The case's replicates: its round medians when it has at least two, else its P50 alone."""
    rounds = [v for v in case.timing.rounds_p50_ms if v > 0]
    if len(rounds) >= MIN_REPLICATES:
        return Replicates("rounds", tuple(rounds))
    p50 = case.latency_ms.p50 if case.latency_ms is not None else None
    return Replicates("none", (p50,) if p50 else ())


def process_replicates(case: CaseResult) -> Replicates | None:
    """The case's per-process medians (`bench --repeat`) when it has at least two, else None."""
    from infermeter.results.records import ProcessRecord, read_record

    record = read_record(case, ProcessRecord)
    if record is None or len(record.medians_ms) < MIN_REPLICATES:
        return None
    return Replicates("processes", record.medians_ms)


@dataclass(frozen=True)
class LogRatioTest:
    """Welch's test on log replicate medians: `ratio` new/base with its 95% interval, the two-sided p-value and
    the Welch–Satterthwaite degrees of freedom."""

    ratio: float
    ci95: tuple[float, float]
    p_value: float
    df: float


def welch_log_ratio(base_ms: Sequence[float], new_ms: Sequence[float], log_ratio: float | None = None) -> LogRatioTest:
    """Welch's t-test and t-interval on log(new) - log(base) replicate medians (each side needs >= 2).

    The ratio is that of the two geometric means unless `log_ratio` gives another centre (the p99 or throughput
    ratio of all samples), which is then judged against the same between-replicate spread."""
    from scipy.stats import t

    logs_b, logs_n = np.log(np.asarray(base_ms, np.float64)), np.log(np.asarray(new_ms, np.float64))
    centre = float(logs_n.mean() - logs_b.mean()) if log_ratio is None else log_ratio
    var_b, var_n = logs_b.var(ddof=1) / len(logs_b), logs_n.var(ddof=1) / len(logs_n)
    se = math.sqrt(var_b + var_n)
    if se == 0.0:  # identical replicates on both sides (a constant synthetic case): no spread to judge by
        return LogRatioTest(math.exp(centre), (math.exp(centre),) * 2, 1.0 if centre == 0 else 0.0, math.inf)
    df = (var_b + var_n) ** 2 / (var_b**2 / (len(logs_b) - 1) + var_n**2 / (len(logs_n) - 1))
    half = float(t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    p_value = float(2 * t.sf(abs(centre) / se, df))
    return LogRatioTest(math.exp(centre), (math.exp(centre - half), math.exp(centre + half)), p_value, float(df))


def noise_floor(*sides: Replicates) -> float | None:
    """The smallest relative change that two single runs of this case can show apart from noise, from the
    between-replicate spread of whichever side has replicates (the largest when both do): the 95% half-width of
    the difference of two single log medians, t(0.975, n-1) × sqrt(2) × sd. None when no side is replicated."""
    from scipy.stats import t

    floors = [
        math.exp(float(t.ppf(0.5 + CONFIDENCE / 2, len(s.medians_ms) - 1)) * math.sqrt(2) * (s.log_sd or 0.0)) - 1
        for s in sides
        if s.replicated
    ]
    return max(floors) if floors else None
