"""What a serving sweep says, read back from its level cases (pure: cases in, figures out).

Definitions (docs/llm-serving.md says the same):

- A sweep is the cases that share a `ServingLevel.series` and `mode`, ordered by level.
- The knee of a concurrency sweep is the last level worth going to: the first level L whose next measured level
  gains less than `KNEE_MIN_GAIN` (10%) output tokens/s while its E2E P50 latency grows. Past the knee, more
  clients mostly queue: they wait longer for the same throughput. No knee means throughput still grew by 10% or
  more at every step (or latency did not grow): the server was not saturated up to the last level.
- A level that is not `ok` (all requests failed, or `short_outputs`: answers shorter than asked) is left out of
  the knee and of the max level under the SLO: its figures do not describe the load asked for.
- The SLO holds at a level when at least `slo_target` (90% by default) of its requests, failed ones included,
  met the TTFT/TPOT bounds. The max level under the SLO is the highest level L such that the SLO held at L and
  at every lower level measured: a level that happens to pass above a failing one is not counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from infermeter.results.records import GenerationSummary, ServingLevel, read_record
from infermeter.results.schema import CaseResult

KNEE_MIN_GAIN = 0.10


@dataclass(frozen=True)
class LevelPoint:
    """One level of a sweep, as the verdict and the report read it; figures are None for a failed level."""

    case: CaseResult
    level: ServingLevel
    summary: GenerationSummary | None

    @property
    def usable(self) -> bool:
        """Whether the level's figures count in the verdict (an `ok` level; not failed, not short_outputs)."""
        return self.case.status == "ok"

    @property
    def tokens_per_s(self) -> float | None:
        """Aggregate output tokens/s, None when nothing succeeded."""
        return self.summary.output_tokens_per_s if self.summary and self.summary.succeeded else None

    @property
    def e2e_p50_ms(self) -> float | None:
        """E2E P50 of the level's successful requests."""
        return self.summary.e2e_ms.p50 if self.summary and self.summary.e2e_ms else None


@dataclass(frozen=True)
class SweepVerdict:
    """The knee (concurrency sweeps) and the highest level under the SLO of one sweep."""

    series: str
    mode: str
    points: tuple[LevelPoint, ...]
    knee: float | None
    max_under_slo: float | None
    slo_set: bool

    def lines(self) -> list[str]:
        """Plain sentences for the console and the markdown report."""
        unit = "concurrency" if self.mode == "concurrency" else "request rate"
        out = []
        if self.mode == "concurrency":
            out.append(
                f"{self.series}: knee at concurrency {fmt_level(self.knee)}"
                if self.knee is not None
                else f"{self.series}: no knee up to concurrency {fmt_level(self.points[-1].level.level)} "
                f"(each step still gained ≥ {KNEE_MIN_GAIN:.0%} output tokens/s, or latency did not grow)"
            )
        if self.slo_set:
            target = self.points[0].level.slo_target
            out.append(
                f"{self.series}: max {unit} under the SLO ({target:.0%} of requests within it): "
                + (fmt_level(self.max_under_slo) if self.max_under_slo is not None else "none (not even the lowest)")
            )
        return out


def fmt_level(level: float | None) -> str:
    """A level as people write it: 4, 0.5."""
    return "-" if level is None else f"{level:g}"


def level_points(cases: Sequence[CaseResult]) -> dict[tuple[str, str], list[LevelPoint]]:
    """The serving-sweep cases grouped by (series, mode), each group ordered by level."""
    groups: dict[tuple[str, str], list[LevelPoint]] = {}
    for case in cases:
        level = read_record(case, ServingLevel)
        if level is None:
            continue
        groups.setdefault((level.series, level.mode), []).append(
            LevelPoint(case, level, read_record(case, GenerationSummary))
        )
    for points in groups.values():
        points.sort(key=lambda p: p.level.level)
    return groups


def find_knee(points: Sequence[LevelPoint], min_gain: float = KNEE_MIN_GAIN) -> float | None:
    """The first level whose next measured level gains < `min_gain` throughput while E2E P50 grows."""
    measured = [p for p in points if p.usable and p.tokens_per_s and p.e2e_p50_ms is not None]
    for here, after in itertools.pairwise(measured):
        assert here.tokens_per_s and after.tokens_per_s and here.e2e_p50_ms and after.e2e_p50_ms
        gain = after.tokens_per_s / here.tokens_per_s - 1.0
        if gain < min_gain and after.e2e_p50_ms > here.e2e_p50_ms:
            return here.level.level
    return None


def max_under_slo(points: Sequence[LevelPoint]) -> float | None:
    """The highest level at which the SLO held, with every lower level holding too."""
    best = None
    for point in points:
        if not point.usable and point.summary and point.summary.succeeded:
            continue  # short outputs: left out, neither holding nor breaking the SLO
        if not point.level.slo_held:
            break
        best = point.level.level
    return best


def verdicts(cases: Sequence[CaseResult]) -> list[SweepVerdict]:
    """One verdict per sweep in `cases`, in the order the sweeps first appear."""
    out = []
    for (series, mode), points in level_points(cases).items():
        slo_set = any(p.level.slo_attainment is not None for p in points)
        knee = find_knee(points) if mode == "concurrency" else None
        out.append(SweepVerdict(series, mode, tuple(points), knee, max_under_slo(points) if slo_set else None, slo_set))
    return out
