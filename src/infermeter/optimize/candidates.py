"""Which configurations are worth trying: backends of the device (with the reason for each one left out), the
precisions this hardware computes natively, pruning of configurations that cannot win, and the time budget.

Pruning is derived from measured figures: a reduced-precision configuration is skipped when its backend's measured
FP32 latency divided by the largest gain that precision could plausibly bring is still no better than the best
admissible configuration already measured. "Plausible" is a prior ceiling per precision, raised (never lowered)
by a larger gain measured on this machine in this run, with a margin.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from infermeter.advise.constraints import accuracy_drop
from infermeter.report.summary import case_label, parity_failed
from infermeter.results.records import AccuracyError, ParityRecord, read_record
from infermeter.results.schema import CaseResult

# Before a precision has been measured on any backend: the most it could gain over FP32 on a CPU. INT8 moves a
# quarter of FP32's bytes and VNNI/AMX-INT8 do 4x the MACs per instruction; BF16/FP16 halve the bytes and, with
# AMX, raise the MAC rate several-fold. Beyond these a reduced-precision run is not believed to win.
PRIOR_GAIN_CEILING = {"int8": 4.0, "bf16": 4.0, "fp16": 4.0}
# A measured gain is widened by this factor before it is used to rule out another backend: backends differ in
# how well they exploit a precision, and a prune must not throw away a plausible winner.
GAIN_MARGIN = 1.5
# Cost of a case before anything has been measured in this run (spawn, import, load, measure, parity).
PRIOR_CASE_S = 30.0


@dataclass(frozen=True)
class BackendPlan:
    """The backends to try (in order) and the ones left out with their reasons."""

    usable: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]


def plan_backends(device: str, requested: Sequence[str]) -> BackendPlan:
    """Backends of `device` (or exactly `requested`), split into usable ones and ones that cannot run here.
    Synthetic backends (`null`) are used only when requested by name."""
    from infermeter.backends.registry import backend_names, get_backend

    names = list(requested) if requested else backend_names()
    usable: list[str] = []
    skipped: list[tuple[str, str]] = []
    for name in names:
        cls = get_backend(name)
        if not requested and (cls.synthetic or cls.device != device):
            continue
        if requested and cls.device != device and not cls.synthetic:
            skipped.append((name, f"a {cls.device} backend; this run optimizes for --device {device}"))
            continue
        reason = cls.available()
        if reason:
            skipped.append((name, f"unavailable ({reason})"))
        else:
            usable.append(name)
    # Backends known to spend long in compilation are tried last, so that a tight budget spends itself on the
    # configurations that are cheap to measure first.
    usable.sort(key=lambda n: get_backend(n).slow_to_load)
    return BackendPlan(tuple(usable), tuple(skipped))


def hardware_precision_reason(precision: str, device: str) -> str | None:
    """Why this machine has no native arithmetic for `precision` (None when it has, and for fp32/int8 on CPU,
    whose int8 support each engine decides for itself)."""
    if device != "cpu":
        return None
    from infermeter.backends._common import NATIVE_ISA, cpu_precision_reason

    if precision not in NATIVE_ISA:
        return None
    reason = cpu_precision_reason(precision, "an engine")
    if reason:
        return f"CPU has no {'/'.join(NATIVE_ISA[precision])} (read from /proc/cpuinfo)"
    return None


def admissible(case: CaseResult, max_drop_pct: float) -> bool:
    """An ok case whose outputs were not found wrong and whose accuracy (if measured) is within the budget."""
    if not case.ok or parity_failed(case):
        return False
    drop = accuracy_drop(case)
    return drop is None or drop <= max_drop_pct


def p50(case: CaseResult) -> float:
    """The case's median latency (inf when not measured)."""
    return case.latency_ms.p50 if case.latency_ms is not None else float("inf")


def best_case(cases: Sequence[CaseResult], max_drop_pct: float, batch: int) -> CaseResult | None:
    """The admissible case with the lowest P50 at `batch`, or None."""
    pool = [c for c in cases if c.batch == batch and admissible(c, max_drop_pct)]
    return min(pool, key=p50) if pool else None


@dataclass
class GainLog:
    """Gains over FP32 measured per reduced precision in this run: precision -> [(backend, gain)]."""

    gains: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    def record(self, precision: str, backend: str, fp32: CaseResult | None, reduced: CaseResult) -> None:
        """Remember `reduced`'s gain over the same backend's FP32 case (when both ran)."""
        if fp32 is None or not fp32.ok or not reduced.ok:
            return
        self.gains.setdefault(precision, []).append((backend, p50(fp32) / p50(reduced)))

    def ceiling(self, precision: str) -> tuple[float, str]:
        """The largest gain `precision` is believed able to bring, and where that belief comes from."""
        prior = PRIOR_GAIN_CEILING.get(precision, 4.0)
        seen = self.gains.get(precision)
        if not seen:
            return prior, f"no {precision} measured yet; ceiling {prior:g}x"
        # Engines differ widely in how much a precision gains them, so another engine's smaller gain never lowers
        # the ceiling below the prior; a larger one (with margin) raises it.
        backend, gain = max(seen, key=lambda item: item[1])
        ceiling = max(gain * GAIN_MARGIN, prior)
        return (
            ceiling,
            f"ceiling {ceiling:.2f}x ({precision} prior {prior:g}x; largest measured here {gain:.2f}x, {backend})",
        )


def prune_reason(
    precision: str, backend: str, fp32: CaseResult | None, best: CaseResult | None, gains: GainLog
) -> str | None:
    """Why `backend` at `precision` cannot plausibly beat `best` (None when it might)."""
    if fp32 is None or not fp32.ok:
        why = "failed" if fp32 is not None else "was not measured"
        return f"its fp32 case {why}, so {precision} on it has nothing to stand on"
    if best is None:
        return None
    ceiling, source = gains.ceiling(precision)
    could_reach = p50(fp32) / ceiling
    if could_reach < p50(best):
        return None
    return (
        f"dominated: its fp32 P50 {p50(fp32):.3g} ms would need a {p50(fp32) / p50(best):.2f}x gain to beat the best "
        f"so far ({best.backend} {best.precision}, {p50(best):.3g} ms); {source}"
    )


# The finalists' group (optimize.steps_finalists) times each finalist for at most this many times --min-time: it
# decides an order, not a figure to a 1% interval. Left to the stop rule, candidates within 2-5% of each other never
# meet it, and the group ran to its 200-round cap (NudeNet: 141 s for three 7 ms cases, most of it the rounds'
# hand-overs). Three times --min-time is about 30 rounds at the default --rounds 10.
GROUP_TIME_FACTOR = 3.0
# Beyond its timing, a finalist's worker spawns, imports its framework and loads (torch.compile: up to 20 s).
GROUP_CASE_OVERHEAD_S = 10.0


def finalists_reserve_s(finalists: int, min_time_s: float) -> float:
    """Seconds the budget keeps for the finalists' group from the start: without it the earlier steps spend the
    whole budget and the group, the step that decides the pick, is the one skipped (resnet18: 2 s were left)."""
    return finalists * (GROUP_TIME_FACTOR * min_time_s + GROUP_CASE_OVERHEAD_S) if finalists >= 2 else 0.0


@dataclass
class Budget:
    """The time this invocation may spend, and cost estimates from the cases measured so far. `reserve_s` is kept
    back from every step until `release_reserve` (the finalists' step)."""

    limit_s: float
    started: float = field(default_factory=time.monotonic)
    reserve_s: float = 0.0

    def elapsed_s(self) -> float:
        """Seconds spent since the start."""
        return time.monotonic() - self.started

    def remaining_s(self) -> float:
        """Seconds left (negative when over), less the reserve."""
        return self.limit_s - self.elapsed_s() - self.reserve_s

    def release_reserve(self) -> None:
        """The reserve becomes available to the step it was kept for."""
        self.reserve_s = 0.0

    @staticmethod
    def estimate_case_s(backend: str, measured: Sequence[CaseResult]) -> tuple[float, str]:
        """Expected seconds of one case on `backend`: the median duration of its measured cases, else of all
        measured cases, else a prior; with where the estimate comes from."""
        durations = [c.duration_s for c in measured if c.backend == backend and c.duration_s]
        if durations:
            return statistics.median(durations), f"median of {len(durations)} {backend} case(s)"
        durations = [c.duration_s for c in measured if c.duration_s]
        if durations:
            return statistics.median(durations), f"median of {len(durations)} measured case(s)"
        return PRIOR_CASE_S, "prior, nothing measured yet"

    def case_reason(self, backend: str, measured: Sequence[CaseResult]) -> str | None:
        """Why a case on `backend` does not fit in what is left of the budget (None when it does)."""
        estimate, source = self.estimate_case_s(backend, measured)
        left = self.remaining_s()
        if estimate <= left:
            return None
        return f"budget: {max(left, 0):.0f} s left, a {backend} case is estimated at {estimate:.0f} s ({source})"

    def work_reason(self, what: str, estimate_s: float, source: str) -> str | None:
        """Why work estimated at `estimate_s` does not fit (None when it does)."""
        left = self.remaining_s()
        if estimate_s <= left:
            return None
        return f"budget: {max(left, 0):.0f} s left, {what} is estimated at {estimate_s:.0f} s ({source})"


def evidence_reason(case: CaseResult, own: str = "fp32") -> str | None:
    """Reduced precision is believed only with evidence about its outputs: an accuracy score or a parity pass.
    The model's `own` precision needs none (an INT8-by-design model's own graph is the reference)."""
    if case.precision in ("fp32", own) or not case.ok:
        return None
    parity = read_record(case, ParityRecord)
    if accuracy_drop(case) is not None or (parity is not None and parity.passed):
        return None
    error = read_record(case, AccuracyError)
    why = error.accuracy_error if error else "not measured"
    return f"{case_label(case)}: {case.precision} without accuracy evidence ({why}); not a candidate"
