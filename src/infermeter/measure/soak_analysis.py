"""The soak's bookkeeping, pure: growth slope with its interval, plateau, latency per window, and the warning.

The slope is judged on the replay only (the exploration's sequence fed again), so memory taken by compiling or
caching shapes seen for the first time is not called a leak: the seed's probe found most early growth was that.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infermeter.results.schema import CaseWarning

# Memory within this of its level is "flat": 2 MB, or 1% of the peak for big processes (page-level noise).
FLAT_MB = 2.0
FLAT_FRACTION = 0.01
LATENCY_WINDOWS = 10
REMEDY = (
    "pad lengths into a few --buckets (e.g. --buckets seq=128,256,512), narrow the --dynamic range, use another "
    "allocator (--allocator jemalloc, or arenas=2 for MALLOC_ARENA_MAX=2), or recycle the worker (serve "
    "--recycle-after N)"
)


@dataclass(frozen=True)
class MemorySample:
    """One reading: after `request` requests, `t_s` seconds into the soak, resident and unique memory (MB)."""

    request: int
    t_s: float
    rss_mb: float
    uss_mb: float


@dataclass(frozen=True)
class Slope:
    """Least-squares growth in MB per 1,000 requests, with its 95% interval (None when fewer than 3 samples)."""

    mb_per_1k: float
    low: float
    high: float


def tolerance_mb(peak_mb: float) -> float:
    """How far memory may move and still count as flat."""
    return max(FLAT_MB, FLAT_FRACTION * peak_mb)


def growth_slope(requests: Sequence[float], rss_mb: Sequence[float]) -> Slope | None:
    """The OLS slope of RSS over requests (MB per 1,000 requests) and its 95% interval from the slope's standard
    error and Student's t with n-2 degrees of freedom (scipy.stats.linregress); None under 3 samples or when every
    sample is at one request."""
    if len(requests) < 3 or len(set(requests)) < 2:
        return None
    from scipy.stats import linregress, t

    fit = linregress(np.asarray(requests, float), np.asarray(rss_mb, float))
    half = float(t.ppf(0.975, len(requests) - 2)) * float(fit.stderr)
    slope = float(fit.slope) * 1000
    half = 0.0 if math.isnan(half) else half * 1000
    return Slope(slope, slope - half, slope + half)


def plateau_at(samples: Sequence[MemorySample], tol_mb: float, min_tail: float = 0.2) -> int | None:
    """The first request after which RSS never rose more than `tol_mb` above its highest level so far, provided
    what follows covers at least `min_tail` of the soak's requests (else too little is known to call it a
    plateau); None when memory kept rising to the end."""
    if len(samples) < 3:
        return None
    last = samples[-1].request
    rss = [s.rss_mb for s in samples]
    future_max = list(np.maximum.accumulate(rss[::-1])[::-1])
    running = -math.inf
    for index, sample in enumerate(samples):
        running = max(running, sample.rss_mb)
        if future_max[index] <= running + tol_mb:
            return sample.request if last - sample.request >= min_tail * last else None
    return None


def is_growing(slope: Slope | None, replay_requests: int, tol_mb: float) -> bool:
    """Still growing: the slope's interval is above zero and its fitted growth over the replay exceeds `tol_mb`."""
    if slope is None:
        return False
    return slope.low > 0 and slope.mb_per_1k * replay_requests / 1000 > tol_mb


def latency_windows(latency_ms: Sequence[float], windows: int = LATENCY_WINDOWS) -> list[list[float]]:
    """`[first, last, p50_ms, p99_ms]` over `windows` equal stretches of requests (0-based request indices)."""
    count = len(latency_ms)
    if count == 0:
        return []
    edges = np.linspace(0, count, min(windows, count) + 1).astype(int)
    out = []
    for start, end in itertools.pairwise(edges):
        chunk = np.asarray(latency_ms[start:end])
        p50, p99 = np.percentile(chunk, [50, 99])
        out.append([int(start), int(end - 1), round(float(p50), 4), round(float(p99), 4)])
    return out


def thin(samples: Sequence[MemorySample], max_points: int = 400) -> list[list[float]]:
    """`[request, t_s, rss_mb, uss_mb]` rows, evenly thinned to at most `max_points` (both ends kept)."""
    step = max(1, -(-len(samples) // max_points))
    picked = list(samples[::step])
    if samples and picked[-1] is not samples[-1]:
        picked.append(samples[-1])
    return [[s.request, round(s.t_s, 3), round(s.rss_mb, 2), round(s.uss_mb, 2)] for s in picked]


def growth_warning(growing: bool, slope: Slope | None, replay_requests: int) -> CaseWarning | None:
    """The `memory_growing` warning with its remedy, for a case still growing at the end of its replay."""
    if not growing or slope is None:
        return None
    growth = slope.mb_per_1k * replay_requests / 1000
    return CaseWarning(
        "memory_growing",
        f"memory was still growing at the end of the soak: {slope.mb_per_1k:+.2f} MB per 1,000 requests "
        f"(95% CI {slope.low:+.2f}..{slope.high:+.2f}) over a replay of shapes already seen, +{growth:.0f} MB in "
        f"{replay_requests:,} requests; {REMEDY}",
        f"+{slope.mb_per_1k:.1f} MB/1k req",
    )
