"""Trends over recorded runs (the runs themselves are kept in the history database, `history.store`): one series
per case id, each run judged against the spread of the runs before it. Pure.

A run is one replicate (its samples share one machine state and are not compared with another run's samples).
Each run is judged on a control chart of the case's previous ok runs (at most the last `WINDOW`): the band is the
mean ± `SIGMAS` standard deviations of their log P50s. A run regresses when its P50 lies above the band AND more
than `threshold` above the median P50 of those runs (big enough to matter, and beyond what the case's own
run-to-run noise has shown). With fewer than `MIN_PREVIOUS` previous runs the spread is unknown and the run is
not judged (`CaseTrend.judged` is False; `history` says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infermeter.history.store import HistoryPoint

DEFAULT_THRESHOLD = 0.10
MIN_PREVIOUS = 3
SIGMAS = 3.0
# Only the recent runs make the band: a slow drift over months (new kernels, new machine images) should move it.
WINDOW = 20


@dataclass(frozen=True)
class TrendPoint:
    """One run of a case: `change` is P50 / median P50 of the previous ok runs (None for the first); `band` the
    control band (low, high) in ms from those runs' log P50s, None when fewer than MIN_PREVIOUS of them."""

    point: HistoryPoint
    change: float | None
    regression: bool
    env_changed: bool
    band: tuple[float, float] | None = None

    @property
    def judged(self) -> bool:
        """True when the run could be judged (an ok run with enough previous runs to know their spread)."""
        return self.band is not None and self.point.p50_ms is not None


@dataclass(frozen=True)
class CaseTrend:
    """Every recorded run of one case id, oldest first."""

    case_id: str
    label: str
    points: list[TrendPoint]

    @property
    def regressed(self) -> bool:
        """True when the latest run is flagged."""
        return bool(self.points) and self.points[-1].regression

    @property
    def judged(self) -> bool:
        """True when the latest run could be judged (see TrendPoint.judged)."""
        return bool(self.points) and self.points[-1].judged


def control_band(p50s_ms: Sequence[float], sigmas: float = SIGMAS) -> tuple[float, float] | None:
    """exp(mean ± sigmas × sd) of the log P50s, or None with fewer than MIN_PREVIOUS values."""
    if len(p50s_ms) < MIN_PREVIOUS:
        return None
    logs = np.log(np.asarray(p50s_ms, dtype=np.float64))
    mean, sd = float(logs.mean()), float(logs.std(ddof=1))
    return math.exp(mean - sigmas * sd), math.exp(mean + sigmas * sd)


def _judge(point: HistoryPoint, previous: Sequence[float], threshold: float) -> TrendPoint:
    """`point` against the P50s of the runs before it."""
    if point.p50_ms is None or not previous:
        return TrendPoint(point, None, False, False)
    recent = previous[-WINDOW:]
    change = point.p50_ms / float(np.median(recent))
    band = control_band(recent)
    regression = band is not None and point.p50_ms > band[1] and change > 1.0 + threshold
    return TrendPoint(point, change, regression, False, band)


def case_trends(points: Sequence[HistoryPoint], threshold: float = DEFAULT_THRESHOLD) -> list[CaseTrend]:
    """Group history points by case id (first-seen order) and judge every run against the runs before it."""
    groups: dict[str, list[HistoryPoint]] = {}
    for point in points:
        groups.setdefault(point.case_id, []).append(point)
    trends = []
    for case_id, series in groups.items():
        first = series[0]
        label = f"{first.model} {first.backend} {first.precision} b{first.batch} {first.shape_mode} t{first.threads}"
        trend: list[TrendPoint] = []
        previous_ok: list[HistoryPoint] = []
        for point in series:
            judged = _judge(point, [p.p50_ms for p in previous_ok if p.p50_ms is not None], threshold)
            env_changed = bool(previous_ok) and previous_ok[-1].env_fingerprint != point.env_fingerprint
            trend.append(TrendPoint(judged.point, judged.change, judged.regression, env_changed, judged.band))
            if point.status == "ok" and point.p50_ms is not None:
                previous_ok.append(point)
        trends.append(CaseTrend(case_id, label, trend))
    return trends
