"""Compare two results files case by case: a ratio with a 95% interval, a significance test, and a verdict that a CI
gate can trust. Pure: no printing.

Method, per paired case and metric (replicate statistics in `infermeter.figures.replicates`):
- replicates: when both files ran the case in several fresh processes (`bench --repeat N`), each process's median;
  otherwise the case's per-round medians (`rounds_p50_ms`, from interleaved rounds); never its raw samples: the
  samples of one run share that run's machine state and are not independent replicates. `CaseChange.replication`
  and the comparison's `method` line say which was used.
- p50: ratio = geometric mean of the new side's round medians over the base side's; its 95% interval and the
  two-sided p-value come from Welch's t-test on the log round medians.
- p99 and throughput (batch × 1000 / mean latency): ratio from all samples of each side, judged against the same
  between-round spread of the log medians (rounds record no per-round tail or mean).
- significant: p_value < alpha. regression: significant, slower, and slower by more than the threshold. Only
  regressions fail a CI gate.
- unreplicated (a side without >= 2 rounds, e.g. a single-backend `bench`): no test is possible; the change is
  reported with a warning, and fails the gate only beyond both the threshold and the case's known noise floor
  (`compare_stats.noise_floor`, from the other side's rounds) when that is known.

Rounds replicate within one run: a change of the machine's state between the two runs is not in their spread.
`compare --rerun` (`infermeter.compare.rerun`) re-measures both sides interleaved in one session and is the gate
to use in CI.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from infermeter.compare.decision import DEFAULT_ALPHA, DEFAULT_THRESHOLD
from infermeter.compare.pairing import pair_cases, pairing_note
from infermeter.figures.metric_registry import GATES, gate_metric
from infermeter.figures.replicates import Replicates, noise_floor, process_replicates, replicates_of, welch_log_ratio
from infermeter.results.env import environment_differences
from infermeter.results.schema import CaseResult, CaseWarning, ResultsFile

if TYPE_CHECKING:
    from infermeter.compare.decision import Decision

METRICS = GATES  # the registry's gateable metrics (p50, p99, throughput), each with its `statistic` below
# Below this many samples a P99 rests on fewer than 5 samples beyond it (see stats.min_samples_for).
MIN_P99_SAMPLES = 500
UNREPLICATED = (
    "unreplicated: this comparison cannot separate a change from machine noise; "
    "use compare --rerun (or bench 2+ backends together, so that each case has rounds)"
)
ROUNDS_CAVEAT = (
    "intervals are from each run's interleaved rounds: a change of the machine's state between the two runs is "
    "not in them; for a CI gate use compare --rerun"
)


@dataclass(frozen=True)
class CaseChange:
    """One paired case. `ratio` is new/base of the metric; `slowdown` > 1 means the new run is slower whatever the
    metric (for throughput it is base/new). `verdict` is faster, slower, not significant, precision differs or
    no data; decided by the sequential rule (`compare --rerun`, `check`: `decision`, its record), slower, faster,
    same or unknown. `replication` says what the interval and test rest on: `processes` (each file's per-process
    medians, `bench --repeat`), `rounds` (each file's round medians), `paired rounds` (`compare --rerun`:
    per-round ratios of one interleaved session) or `none` (unreplicated)."""

    label: str
    base: CaseResult
    _: KW_ONLY  # the rest by keyword
    new: CaseResult
    paired_by: str  # "id", "variables" (same model/backend/precision/batch/shape/threads), "model" or "rerun"
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
    replication: str = "none"
    replicates: tuple[int, int] = (0, 0)  # base, new
    noise_floor: float | None = None  # unreplicated: the smallest change the case's known noise lets through
    decision: Decision | None = None  # the sequential decision's record, when one judged this change

    @property
    def undecided(self) -> bool:
        """True when a sequential decision ran out of budget (*unknown*): a gate must not pass on it."""
        return self.decision is not None and self.decision.outcome == "unknown"

    @property
    def slowdown(self) -> float | None:
        """How many times slower the new run is (> 1 slower, < 1 faster), whichever the metric."""
        if self.ratio is None:
            return None
        return 1.0 / self.ratio if higher_is_better(self.metric) else self.ratio

    @property
    def unreplicated(self) -> bool:
        """True when a ratio was computed without replicates on both sides (no test, no interval)."""
        return self.ratio is not None and self.replication == "none"

    @property
    def regression(self) -> bool:
        """Slower beyond the threshold, and significant (or, unreplicated, beyond the known noise): what fails a
        CI gate."""
        return self.verdict == "slower" and self.beyond_threshold


@dataclass(frozen=True)
class Comparison:
    """The whole comparison: paired changes, cases present on one side only, environment differences."""

    metric: str
    threshold: float
    _: KW_ONLY  # the rest by keyword
    alpha: float
    changes: list[CaseChange]
    only_base: list[CaseResult]
    only_new: list[CaseResult]
    env_differences: list[str]
    remarks: list[str] = field(default_factory=list)  # said once below the table (e.g. cases not re-measured)

    @property
    def regressions(self) -> list[CaseChange]:
        """The changes that fail the gate."""
        return [c for c in self.changes if c.regression]

    @property
    def undecided(self) -> list[CaseChange]:
        """The changes a sequential decision left *unknown* (its budget ran out): they fail the gate too."""
        return [c for c in self.changes if c.undecided]

    @property
    def warnings(self) -> list[str]:
        """What limits the whole comparison: unreplicated cases, intervals from within-run rounds."""
        found = []
        unreplicated = [c for c in self.changes if c.unreplicated]
        if unreplicated:
            found.append(f"{len(unreplicated)} case(s) {UNREPLICATED}")
        if any(c.replication == "rounds" for c in self.changes):
            found.append(ROUNDS_CAVEAT)
        return found

    @property
    def method(self) -> str:
        """What the intervals and tests rest on, counted over the compared cases (one line for displays)."""
        names = {
            "processes": "per-process medians (bench --repeat)",
            "rounds": "round medians within each run",
            "paired rounds": "per-round ratios of one interleaved rerun",
            "none": "nothing (unreplicated)",
        }
        counts: dict[str, int] = {}
        for change in self.changes:
            if change.ratio is not None:
                counts[change.replication] = counts.get(change.replication, 0) + 1
        if not counts:
            return ""
        parts = [f"{count} case(s) on {names.get(kind, kind)}" for kind, count in counts.items()]
        return "replicates: " + "; ".join(parts)


def higher_is_better(metric: str) -> bool:
    """True when a rise of this `compare --metric` is an improvement (throughput), from the registry."""
    return gate_metric(metric).better == "higher"


def statistic(samples: np.ndarray, metric: str, batch: int) -> float:
    """The metric of one sample set (milliseconds in; ms for p50/p99, inferences/s for throughput)."""
    if metric == "p50":
        return float(np.median(samples))
    if metric == "p99":
        return float(np.percentile(samples, 99))
    return batch * 1000.0 / float(np.mean(samples))


def case_label(case: CaseResult) -> str:
    """The case's controlled variables in one line, as the comparison table shows them."""
    return f"{case.model} {case.backend} {case.precision} b{case.batch} {case.shape_mode} t{case.threads}"


def _limit_verdict(slowdown: float, limit: float, significant: bool) -> tuple[bool, str]:
    """(beyond the limit in either direction, verdict) of a change judged significant or not."""
    beyond = slowdown > 1.0 + limit or slowdown < 1.0 / (1.0 + limit)
    if not significant:
        return beyond, "not significant"
    return beyond, "slower" if slowdown > 1.0 else "faster"


def _refusal(base: CaseResult, new: CaseResult, allow_mixed_precision: bool, notes: list[str]) -> str | None:
    """The verdict when the pair cannot be compared (no data, precision differs), with its reason in `notes`."""
    if not (base.ok and new.ok and base.timing.samples_ms and new.timing.samples_ms):
        notes.append(f"base {base.status}, new {new.status}")
        return "no data"
    if base.precision_effective != new.precision_effective:
        text = f"effective precision {base.precision_effective} vs {new.precision_effective}"
        if not allow_mixed_precision:
            notes.append(text)
            return "precision differs"
        notes.append(text + " (compared anyway: --allow-mixed-precision)")
    return None


def compare_cases(
    base: CaseResult,
    new: CaseResult,
    metric: str = "p50",
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    paired_by: str = "id",
    allow_mixed_precision: bool = False,
) -> CaseChange:
    """The change of one metric between two measurements of the same case, judged on replicate medians."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, not {metric!r}")
    label = case_label(new)
    notes = []
    note = pairing_note(base, new, paired_by)
    if note:
        notes.append(note)
    refused = _refusal(base, new, allow_mixed_precision, notes)
    if refused:
        return CaseChange(label, base, new=new, paired_by=paired_by, metric=metric, verdict=refused, notes=notes)
    b = np.asarray(base.timing.samples_ms, dtype=np.float64)
    n = np.asarray(new.timing.samples_ms, dtype=np.float64)
    base_value, new_value = statistic(b, metric, base.batch), statistic(n, metric, new.batch)
    if metric == "p99" and min(len(b), len(n)) < MIN_P99_SAMPLES:
        notes.append(f"P99 from fewer than {MIN_P99_SAMPLES} samples: its interval is wide")
    processes = (process_replicates(base), process_replicates(new))
    if processes[0] is not None and processes[1] is not None:
        reps = (processes[0], processes[1])  # both files ran --repeat: the processes are the replicates
    else:
        reps = (replicates_of(base), replicates_of(new))
    counts = (len(reps[0].medians_ms), len(reps[1].medians_ms))
    draft = CaseChange(
        label,
        base,
        new=new,
        paired_by=paired_by,
        metric=metric,
        base_value=base_value,
        new_value=new_value,
        notes=notes,
        replicates=counts,
    )
    point = new_value / base_value
    if reps[0].replicated and reps[1].replicated:
        return _replicated(draft, reps, point, threshold, alpha)
    return _unreplicated(draft, reps, point, threshold)


def _replicated(
    draft: CaseChange, reps: tuple[Replicates, Replicates], point: float, threshold: float, alpha: float
) -> CaseChange:
    """Welch's test on the two sides' log replicate medians, per process or per round (centred on the sample ratio
    for p99 and throughput)."""
    metric = draft.metric
    # The replicates are latencies: throughput's ratio is judged as the latency ratio it implies, then inverted.
    higher = higher_is_better(metric)
    latency_ratio = 1.0 / point if higher else point
    test = welch_log_ratio(reps[0].medians_ms, reps[1].medians_ms, None if metric == "p50" else math.log(latency_ratio))
    low, high = test.ci95
    ratio, ci = (1.0 / test.ratio, (1.0 / high, 1.0 / low)) if higher else (test.ratio, (low, high))
    significant = test.p_value < alpha
    slowdown = 1.0 / ratio if higher else ratio
    beyond, verdict = _limit_verdict(slowdown, threshold, significant)
    if significant and not beyond:
        draft.notes.append(f"within the {threshold:.0%} threshold")
    return replace(
        draft,
        ratio=ratio,
        ratio_ci95=ci,
        p_value=test.p_value,
        significant=significant,
        beyond_threshold=beyond,
        verdict=verdict,
        replication=reps[0].kind,
    )


def _unreplicated(draft: CaseChange, reps: tuple[Replicates, Replicates], point: float, threshold: float) -> CaseChange:
    """No test: the point ratio, judged against the threshold and, when one side's rounds show it, the case's
    noise floor (a change smaller than the noise between two single runs is never called)."""
    floor = noise_floor(*reps)
    limit = max(threshold, floor or 0.0)
    slowdown = 1.0 / point if higher_is_better(draft.metric) else point
    beyond, verdict = _limit_verdict(slowdown, limit, True)
    if floor is not None and floor > threshold:
        draft.notes.append(f"unreplicated: changes within the case's noise floor ±{floor:.1%} are not judged")
    else:
        draft.notes.append("unreplicated")
    return replace(
        draft,
        ratio=point,
        beyond_threshold=beyond,
        verdict=verdict if beyond else "unreplicated",
        noise_floor=floor,
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
    changes = [compare_cases(b, n, metric, threshold, alpha, how, allow_mixed_precision) for b, n, how in pairs]
    changes = [_with_engine_warnings(change) for change in changes]
    remarks = [f"{change.label} ({side}): {w.message}" for change in changes for side, w in _engine_warnings(change)]
    return Comparison(
        metric,
        threshold,
        alpha=alpha,
        changes=changes,
        only_base=only_base,
        only_new=only_new,
        env_differences=environment_differences(base.environment, new.environment),
        remarks=list(dict.fromkeys(remarks)),
    )


def _engine_warnings(change: CaseChange) -> list[tuple[str, CaseWarning]]:
    """(side, warning) of each `engine_warning` of the pair: an engine that said it could not optimize part of the
    model, a likely reason for its figure."""
    sides = (("base", change.base), ("new", change.new))
    return [(side, w) for side, case in sides for w in case.warnings if w.code == "engine_warning"]


def _with_engine_warnings(change: CaseChange) -> CaseChange:
    """`change` with its engine warnings named next to its figures (their full text is said below the table)."""
    found = [f"engine warning ({side}): {w.detail or w.code}" for side, w in _engine_warnings(change)]
    return replace(change, notes=[*change.notes, *found]) if found else change
