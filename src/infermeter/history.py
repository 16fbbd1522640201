"""Trends over recorded runs: one series per case id, each run flagged when it regressed. Pure.

A run regresses when its P50 is more than `threshold` above the median P50 of the case's previous runs AND a
two-sided Mann–Whitney U test against the previous run's raw samples is significant at `alpha` (the same
two-part rule as `compare`: big enough to matter and unlikely to be noise). Without raw samples the threshold
alone decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infermeter.compare import DEFAULT_ALPHA
from infermeter.results.store import HistoryPoint

DEFAULT_THRESHOLD = 0.10


@dataclass(frozen=True)
class TrendPoint:
    """One run of a case: `change` is P50 / median P50 of the previous ok runs (None for the first)."""

    point: HistoryPoint
    change: float | None
    regression: bool
    env_changed: bool


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


def case_trends(
    points: Sequence[HistoryPoint], threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA
) -> list[CaseTrend]:
    """Group history points by case id (first-seen order) and flag regressions."""
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
            change, regression = None, False
            env_changed = bool(previous_ok) and previous_ok[-1].env_fingerprint != point.env_fingerprint
            if point.p50_ms is not None and previous_ok:
                reference = float(np.median([p.p50_ms for p in previous_ok if p.p50_ms is not None]))
                change = point.p50_ms / reference
                regression = change > 1.0 + threshold and _significant(previous_ok[-1], point, alpha)
            if point.status == "ok" and point.p50_ms is not None:
                previous_ok.append(point)
            trend.append(TrendPoint(point, change, regression, env_changed))
        trends.append(CaseTrend(case_id, label, trend))
    return trends


def _significant(before: HistoryPoint, after: HistoryPoint, alpha: float) -> bool:
    if len(before.samples_ms) < 2 or len(after.samples_ms) < 2:
        return True  # no raw samples: the threshold alone decides
    from scipy.stats import mannwhitneyu

    return bool(mannwhitneyu(before.samples_ms, after.samples_ms, alternative="two-sided").pvalue < alpha)
