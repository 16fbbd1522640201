"""Pick a configuration from measured cases under the user's constraints, and explain the pick with the numbers.
Pure and library-usable (`advise(results, Constraints(...), objective) -> Advice`); derived from the measured data
only: no framework is preferred by name anywhere in this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field

from infermeter.advise.constraints import Binding, Constraints, binding_constraints, violation_text, violations
from infermeter.advise.tradeoff import (
    CaseCost,
    case_costs,
    cost_lines,
    paired_margin_lines,
    shortfall_text,
    traded_line,
)
from infermeter.report.groups import machine_of
from infermeter.report.pareto import pareto_front
from infermeter.report.summary import case_label, format_ms, parity_failed
from infermeter.results.records import Accuracy, ParityRecord, read_record
from infermeter.results.schema import CaseResult

OBJECTIVES = ("latency", "throughput", "memory")


@dataclass(frozen=True)
class Exclusion:
    """A measured case that cannot be picked, and every reason why."""

    case: CaseResult
    reasons: list[str]


@dataclass(frozen=True)
class Advice:
    """The recommendation: `pick` (None when nothing meets the constraints), the ranked candidates, their Pareto
    front over (P50 latency, throughput, peak memory), the exclusions with reasons, the explanation lines and,
    when there is no pick, the binding constraints (closest first)."""

    objective: str
    constraints: Constraints
    _: KW_ONLY  # the rest by keyword
    pick: CaseResult | None
    ranked: list[CaseResult]
    pareto: list[CaseResult]
    excluded: list[Exclusion]
    explanation: list[str]
    binding: list[Binding] = field(default_factory=list)
    price_per_hour: float | None = None  # the machine's price (user's currency per hour), when given
    costs: tuple[CaseCost, ...] = ()  # every ok case's cost per million inferences, when a price was given

    def cost_of(self, case: CaseResult) -> float | None:
        """The case's cost per million inferences (None without a price or a throughput)."""
        return next((c.cost_per_million for c in self.costs if c.case_id == case.id), None)


def _p50(case: CaseResult) -> float:
    return case.latency_ms.p50 if case.latency_ms is not None else float("inf")


def _rank_key(objective: str) -> Callable[[CaseResult], tuple[float, float]]:
    if objective == "throughput":
        return lambda c: (-(c.timing.throughput or 0.0), _p50(c))
    if objective == "memory":
        return lambda c: (c.memory.peak_rss_mb if c.memory.peak_rss_mb is not None else float("inf"), _p50(c))
    return lambda c: (_p50(c), c.latency_ms.p99 if c.latency_ms else float("inf"))


def describe(case: CaseResult) -> str:
    """`P50 0.50 ms, P99 0.56 ms, 2,000/s, 150 MB, load 0.40 s` for one case."""
    stats = case.latency_ms
    parts = [f"P50 {format_ms(stats.p50)} ms, P99 {format_ms(stats.p99)} ms" if stats else "no latency"]
    if case.timing.throughput is not None:
        parts.append(f"{case.timing.throughput:,.0f}/s")
    if case.memory.peak_rss_mb is not None:
        parts.append(f"peak {case.memory.peak_rss_mb:,.0f} MB")
    if case.loading.load_s is not None:
        parts.append(f"load {case.loading.load_s:.2f} s")
    return ", ".join(parts)


def _sort_out(
    cases: Sequence[CaseResult], constraints: Constraints
) -> tuple[list[CaseResult], list[CaseResult], list[Exclusion]]:
    """(candidates, eligible, excluded): the ok real cases that meet every constraint; those whose outputs are
    trusted (what the constraints are judged on); and every other case with its reasons."""
    excluded: list[Exclusion] = []
    candidates: list[CaseResult] = []
    eligible: list[CaseResult] = []
    for case in cases:
        if not case.ok:
            excluded.append(Exclusion(case, [f"{case.status}: {case.error or 'no measurement'}"]))
            continue
        if case.synthetic:
            # The null backend's figures are whatever it was told to produce: never a deployment to recommend.
            excluded.append(Exclusion(case, [f"{case.backend} is a synthetic backend: it runs no model"]))
            continue
        reasons = []
        if parity_failed(case):
            reasons.append("its outputs failed the parity check against the reference")
        else:
            eligible.append(case)
        reasons += [violation_text(*v) for v in violations(case, constraints)]
        if reasons:
            excluded.append(Exclusion(case, reasons))
        else:
            candidates.append(case)
    return candidates, eligible, excluded


def advise(
    cases: Sequence[CaseResult],
    constraints: Constraints | None = None,
    objective: str = "latency",
    price_per_hour: float | None = None,
    ruled_out: Sequence[Exclusion] = (),
) -> Advice:
    """Filter the ok cases by the constraints (parity failures out, with the reason), rank the rest by the
    objective, and explain the pick and what it traded; when nothing is left, name the binding constraints. With
    `price_per_hour` (the machine's price), every ok case gets its cost per million inferences. `ruled_out`:
    cases the caller already set aside, with its reasons (optimize's candidates that were not finalists): listed
    with the exclusions and priced, never ranked or compared with the pick."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, not {objective!r}")
    constraints = constraints or Constraints()
    candidates, eligible, excluded = _sort_out(cases, constraints)
    excluded += ruled_out
    costs = case_costs([*cases, *(e.case for e in ruled_out)], price_per_hour)
    ranked = sorted(candidates, key=_rank_key(objective))
    if not ranked:
        binding = binding_constraints(eligible, constraints)
        lines = [f"No case meets the constraints ({len(eligible)} ok case(s) with trusted outputs measured)."]
        lines += [b.message for b in binding]
        return Advice(
            objective,
            constraints,
            pick=None,
            ranked=[],
            pareto=[],
            excluded=excluded,
            explanation=lines,
            binding=binding,
            price_per_hour=price_per_hour,
            costs=costs,
        )
    points = [(_p50(c), c.timing.throughput or 0.0, c.memory.peak_rss_mb or float("inf")) for c in ranked]
    pareto = [ranked[i] for i in pareto_front(points, maximize=(False, True, False))]
    advice = Advice(
        objective,
        constraints,
        pick=ranked[0],
        ranked=ranked,
        pareto=pareto,
        excluded=excluded,
        explanation=[],
        price_per_hour=price_per_hour,
        costs=costs,
    )
    advice.explanation.extend(_explain(ranked[0], ranked, pareto, cases, excluded, objective))
    advice.explanation.extend(_trade(advice, cases))
    return advice


def _trade(advice: Advice, cases: Sequence[CaseResult]) -> list[str]:
    """What the pick traded against the best real case on the objective that the constraints left out, and its
    cost against the cheapest candidate."""
    pick = advice.pick
    assert pick is not None
    lines = []
    real = [c for c in cases if c.ok and not c.synthetic]
    best = sorted(real, key=_rank_key(advice.objective))[0] if real else pick
    if best is not pick and _rank_key(advice.objective)(best) < _rank_key(advice.objective)(pick):
        shortfalls = ["failed the parity check against the reference"] if parity_failed(best) else []
        shortfalls += [
            shortfall_text(check.what, value, check.unit, limit, check.flag, check.upper)
            for check, value, limit in violations(best, advice.constraints)
        ]
        lines.append(traded_line(pick, best, shortfalls, advice.objective, advice.cost_of))
    if advice.price_per_hour is not None:
        lines += cost_lines(advice.ranked, advice.price_per_hour, advice.cost_of)
    return lines


def _explain(
    pick: CaseResult,
    ranked: list[CaseResult],
    pareto: list[CaseResult],
    cases: Sequence[CaseResult],
    excluded: list[Exclusion],
    objective: str,
) -> list[str]:
    measure = {"latency": "lowest P50 latency", "throughput": "highest throughput", "memory": "lowest peak memory"}
    ok = [c for c in cases if c.ok]
    lines = [
        f"Pick {case_label(pick)}: {describe(pick)}.",
        f"It has the {measure[objective]} of the {len(ranked)} case(s) that meet the constraints "
        f"({len(ok)} measured ok).",
    ]
    if len(ranked) > 1:
        runner = ranked[1]
        lines.append(f"Runner-up: {case_label(runner)}: {describe(runner)}.")
        lines += paired_margin_lines(pick, runner)
    lines += _per_machine(ranked, objective)
    if any(w.code == "interference" for w in pick.warnings):
        lines.append("Caution: other work on the machine disturbed the pick's measurement (interference); rerun idle.")
    best_overall = sorted(ok, key=_rank_key(objective))[0] if ok else pick
    if best_overall is not pick:
        reasons = next((e.reasons for e in excluded if e.case is best_overall), [])
        lines.append(
            f"Not {case_label(best_overall)}, although it is better on {objective} ({describe(best_overall)}): "
            + "; ".join(reasons)
            + "."
        )
    if pick.precision_effective and pick.precision_effective != pick.precision:
        lines.append(f"Note: it runs {pick.precision_effective} although {pick.precision} was requested.")
    precisions = {c.precision_effective for c in ranked if c.precision_effective}
    if len(precisions) > 1:
        lines.append(
            f"The candidates run different precisions ({', '.join(sorted(precisions))}): check accuracy before "
            "trusting a lower-precision pick."
        )
    accuracy = read_record(pick, Accuracy)
    if accuracy is not None:
        lines.append(f"Accuracy: {accuracy.metric} {accuracy.value} ({accuracy.drop_pct:.2f}% drop vs the reference).")
    else:
        lines.append("Accuracy is unverified: this case carries no accuracy measurement.")
    parity = read_record(pick, ParityRecord)
    if parity is None or not parity.passed:
        lines.append("Outputs were not checked against a reference (no parity result).")
    on_front = "on" if pick in pareto else "not on"
    lines.append(
        f"Pareto front (P50 latency, throughput, peak memory): {', '.join(case_label(c) for c in pareto)}; "
        f"the pick is {on_front} it."
    )
    return lines


def _per_machine(ranked: list[CaseResult], objective: str) -> list[str]:
    """When the candidates ran on several cluster machine classes (`bench --cluster --machines`): the best of each
    class, so the answer is which machine and which engine."""
    best: dict[str, CaseResult] = {}
    for case in ranked:  # best first
        machine = machine_of(case)
        if machine is not None:
            best.setdefault(machine, case)
    if len(best) < 2:
        return []
    ranks = "; ".join(f"{machine}: {case_label(case)} ({describe(case)})" for machine, case in best.items())
    return [f"Best per machine class, by {objective}: {ranks}."]
