"""Pick a configuration from measured cases under the user's constraints, and explain the pick with the numbers.
Pure and library-usable (`advise(results, Constraints(...), objective) -> Advice`); derived from the measured data
only: no framework is preferred by name anywhere in this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field

from infermeter.advise.tradeoff import (
    CaseCost,
    case_costs,
    cost_lines,
    paired_margin_lines,
    shortfall_text,
    traded_line,
)
from infermeter.figures.metric_registry import Metric, metric
from infermeter.report.groups import machine_of
from infermeter.report.pareto import pareto_front
from infermeter.report.summary import case_label, format_ms, parity_failed
from infermeter.results.records import Accuracy, ParityRecord, read_record
from infermeter.results.schema import CaseResult

OBJECTIVES = ("latency", "throughput", "memory")


@dataclass(frozen=True)
class Constraints:
    """Limits a case must meet; None means no limit. `max_accuracy_drop_pct` reads the case's `Accuracy` record."""

    max_p99_ms: float | None = None
    max_memory_mb: float | None = None
    max_load_s: float | None = None
    min_throughput: float | None = None
    max_accuracy_drop_pct: float | None = None


@dataclass(frozen=True)
class _Check:
    """A constraint flag on one metric of the registry (its name, unit and better direction say how it is judged:
    a lower-is-better metric has an upper limit)."""

    flag: str
    attribute: str
    metric: Metric

    @property
    def what(self) -> str:
        return self.metric.name

    @property
    def unit(self) -> str:
        return self.metric.suffix

    @property
    def upper(self) -> bool:
        """True: the value must be <= the limit; False: >= the limit."""
        return self.metric.better == "lower"

    def value(self, case: CaseResult) -> float | None:
        return self.metric.value(case)


def accuracy_drop(case: CaseResult) -> float | None:
    """The accuracy drop (points) recorded on a case, or None when it carries no accuracy measurement."""
    accuracy = read_record(case, Accuracy)
    return None if accuracy is None else accuracy.drop_pct


# Not a table metric (the table has a parity column instead), so not in the registry: declared here the same way.
_ACCURACY_DROP = Metric(
    "accuracy_drop_pct", "accuracy drop", header="accuracy drop", unit="%", better="lower", read=accuracy_drop
)
CHECKS = (
    _Check("--max-p99-ms", "max_p99_ms", metric("p99_ms")),
    _Check("--max-memory-mb", "max_memory_mb", metric("peak_rss_mb")),
    _Check("--max-load-s", "max_load_s", metric("load_s")),
    _Check("--min-throughput", "min_throughput", metric("throughput")),
    _Check("--max-accuracy-drop", "max_accuracy_drop_pct", _ACCURACY_DROP),
)


@dataclass(frozen=True)
class Exclusion:
    """A measured case that cannot be picked, and every reason why."""

    case: CaseResult
    reasons: list[str]


@dataclass(frozen=True)
class Binding:
    """A constraint that keeps every case out: the best value a case reaches against the limit."""

    flag: str
    limit: float
    best_value: float
    best_case: CaseResult
    gap_pct: float  # how far the best case is off the limit, in percent of the limit
    alone: bool  # True when relaxing this constraint alone would admit a case

    @property
    def message(self) -> str:
        """One sentence naming the constraint and the distance."""
        check = next(c for c in CHECKS if c.flag == self.flag)
        scope = "the best case that meets every other constraint" if self.alone else "the best case"
        direction = "over" if check.upper else "under"
        return (
            f"{self.flag} {self.limit:g} is binding: {scope}, {case_label(self.best_case)}, has {check.what} "
            f"{self.best_value:,.4g}{check.unit} ({self.gap_pct:.0f}% {direction} the limit)"
        )


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
        return lambda c: (-(c.throughput or 0.0), _p50(c))
    if objective == "memory":
        return lambda c: (c.peak_rss_mb if c.peak_rss_mb is not None else float("inf"), _p50(c))
    return lambda c: (_p50(c), c.latency_ms.p99 if c.latency_ms else float("inf"))


def _violations(case: CaseResult, constraints: Constraints) -> list[tuple[_Check, float | None, float]]:
    out: list[tuple[_Check, float | None, float]] = []
    for check in CHECKS:
        limit = getattr(constraints, check.attribute)
        if limit is None:
            continue
        value = check.value(case)
        if value is None:
            if check.attribute != "max_accuracy_drop_pct":  # no accuracy data: not excluded, flagged as unverified
                out.append((check, None, limit))
        elif (value > limit) if check.upper else (value < limit):
            out.append((check, value, limit))
    return out


def _violation_text(check: _Check, value: float | None, limit: float) -> str:
    if value is None:
        return f"{check.what} was not measured, so {check.flag} {limit:g} cannot be verified"
    ratio = value / limit if limit else float("inf")
    how = f"{ratio:.1f}x the limit" if check.upper else f"{value / limit:.0%} of the minimum" if limit else ""
    return f"its {check.what} {value:,.4g}{check.unit} breaks {check.flag} {limit:g} ({how})"


def describe(case: CaseResult) -> str:
    """`P50 0.50 ms, P99 0.56 ms, 2,000/s, 150 MB, load 0.40 s` for one case."""
    stats = case.latency_ms
    parts = [f"P50 {format_ms(stats.p50)} ms, P99 {format_ms(stats.p99)} ms" if stats else "no latency"]
    if case.throughput is not None:
        parts.append(f"{case.throughput:,.0f}/s")
    if case.peak_rss_mb is not None:
        parts.append(f"peak {case.peak_rss_mb:,.0f} MB")
    if case.load_s is not None:
        parts.append(f"load {case.load_s:.2f} s")
    return ", ".join(parts)


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
    excluded: list[Exclusion] = []
    candidates: list[CaseResult] = []
    eligible: list[CaseResult] = []  # ok and parity not failed: what the constraints are judged on
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
        reasons += [_violation_text(*v) for v in _violations(case, constraints)]
        if reasons:
            excluded.append(Exclusion(case, reasons))
        else:
            candidates.append(case)
    excluded += ruled_out
    priced = [*cases, *(e.case for e in ruled_out)]
    key = _rank_key(objective)
    ranked = sorted(candidates, key=key)
    points = [(_p50(c), c.throughput or 0.0, c.peak_rss_mb or float("inf")) for c in ranked]
    pareto = [ranked[i] for i in pareto_front(points, maximize=(False, True, False))]
    if not ranked:
        binding = _binding(eligible, constraints)
        lines = [f"No case meets the constraints ({len(eligible)} ok case(s) with trusted outputs measured)."]
        lines += [b.message for b in binding]
        costs = case_costs(priced, price_per_hour)
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
    advice = Advice(
        objective,
        constraints,
        pick=ranked[0],
        ranked=ranked,
        pareto=pareto,
        excluded=excluded,
        explanation=[],
        price_per_hour=price_per_hour,
        costs=case_costs(priced, price_per_hour),
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
            for check, value, limit in _violations(best, advice.constraints)
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


def _binding(eligible: list[CaseResult], constraints: Constraints) -> list[Binding]:
    active = [c for c in CHECKS if getattr(constraints, c.attribute) is not None]
    found: list[Binding] = []
    for check in active:
        limit = float(getattr(constraints, check.attribute))
        others = Constraints(**{**constraints.__dict__, check.attribute: None})
        pool = [c for c in eligible if not _violations(c, others) and check.value(c) is not None]
        alone = bool(pool)
        if not pool:
            pool = [c for c in eligible if check.value(c) is not None]
        if not pool:
            continue
        best = (min if check.upper else max)(pool, key=lambda c: check.value(c) or 0.0)
        value = check.value(best)
        assert value is not None
        if (value <= limit) if check.upper else (value >= limit):
            continue  # this constraint is met by its best case: not what keeps cases out
        gap = abs(value - limit) / limit * 100 if limit else float("inf")
        found.append(Binding(check.flag, limit, value, best, gap, alone))
    return sorted(found, key=lambda b: (not b.alone, b.gap_pct))
