"""The cost side of the seeds' triangle (cost, performance, memory): what a million inferences cost at a case's
measured throughput on a machine billed by the hour, and the sentences saying what a pick under constraints
traded against the best case measured, and the pick's paired margin over the runner-up. Pure; `advise` calls
it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from infermeter.report.groups import comparison_group
from infermeter.report.summary import case_label, format_ms
from infermeter.results.schema import CaseResult

SECONDS_PER_HOUR = 3600.0
PER_MILLION = 1e6


@dataclass(frozen=True)
class CaseCost:
    """A case's cost per million inferences at its measured throughput, on a machine of `price_per_hour` (the
    user's currency per hour). `cost_per_million` is None when the case has no throughput."""

    case_id: str
    throughput_per_s: float | None
    price_per_hour: float
    cost_per_million: float | None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (the optimize journal keeps one per measured case)."""
        return {
            "case_id": self.case_id,
            "throughput_per_s": self.throughput_per_s,
            "price_per_hour": self.price_per_hour,
            "cost_per_million": self.cost_per_million,
        }


def cost_per_million(price_per_hour: float, throughput_per_s: float | None) -> float | None:
    """price_per_hour / (throughput_per_s × 3600) × 1e6: the machine's price of a million inferences when it runs
    this configuration flat out. None without a positive throughput."""
    if throughput_per_s is None or throughput_per_s <= 0:
        return None
    return price_per_hour / (throughput_per_s * SECONDS_PER_HOUR) * PER_MILLION


def case_costs(cases: Sequence[CaseResult], price_per_hour: float | None) -> tuple[CaseCost, ...]:
    """The cost of every ok case (none without a price)."""
    if price_per_hour is None:
        return ()
    return tuple(
        CaseCost(c.id, c.timing.throughput, price_per_hour, cost_per_million(price_per_hour, c.timing.throughput))
        for c in cases
        if c.ok
    )


def format_cost(value: float | None) -> str:
    """`0.42`, `0.000317`, `1,250`: three significant digits, no exponent."""
    if value is None:
        return "—"
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value >= 0.001 else f"{value:.2e}"


def cost_note(cost: float | None) -> str:
    """` (cost 0.42 per million)` after an excluded case, "" without a cost."""
    return f" (cost {format_cost(cost)} per million)" if cost is not None else ""


def shortfall_text(what: str, value: float | None, unit: str, limit: float, flag: str, upper: bool) -> str:
    """`has peak memory 900 MB, over the 512 MB limit (--max-memory-mb)`: a broken constraint, said short."""
    if value is None:
        return f"has no measured {what}, so {flag} {limit:g} cannot be verified"
    side = "over the" if upper else "under the"
    bound = "limit" if upper else "minimum"
    return f"has {what} {value:,.4g}{unit}, {side} {limit:g}{unit} {bound} ({flag})"


def _p50(case: CaseResult) -> float:
    return case.latency_ms.p50 if case.latency_ms is not None else float("inf")


def _gap(pick: CaseResult, best: CaseResult, objective: str) -> str:
    """How much worse the pick is than `best` on the objective, in a ratio and the two figures."""
    if objective == "throughput":
        mine, theirs = pick.timing.throughput, best.timing.throughput
        ratio = (theirs or 0.0) / (mine or float("inf"))
        return f"{ratio:.2f}x less throughput ({mine or 0:,.0f}/s vs {theirs or 0:,.0f}/s)"
    if objective == "memory":
        mine, theirs = pick.memory.peak_rss_mb, best.memory.peak_rss_mb
        ratio = (mine or 0.0) / (theirs or float("inf"))
        return f"{ratio:.2f}x the peak memory ({mine or 0:,.0f} MB vs {theirs or 0:,.0f} MB)"
    ratio = _p50(pick) / _p50(best)
    return f"{ratio:.2f}x slower (P50 {format_ms(_p50(pick))} ms vs {format_ms(_p50(best))} ms)"


def traded_line(
    pick: CaseResult,
    best: CaseResult,
    shortfalls: Sequence[str],
    objective: str,
    cost_of: Callable[[CaseResult], float | None],
) -> str:
    """`Traded: picked A, 1.30x slower (P50 …) than the best measured, B, which has peak memory 900 MB, over the
    512 MB limit; costs 0.42 per million inferences vs 0.31.` (`best` is the best case on the objective, left out
    for `shortfalls`)."""
    best_word = {"latency": "fastest", "throughput": "highest-throughput", "memory": "leanest"}[objective]
    why = "; ".join(shortfalls) or "it is not a candidate"
    line = (
        f"Traded: picked {case_label(pick)}, {_gap(pick, best, objective)} than the {best_word} case measured, "
        f"{case_label(best)}, which {why}"
    )
    pick_cost, best_cost = cost_of(pick), cost_of(best)
    if pick_cost is not None and best_cost is not None:
        line += f"; the pick costs {format_cost(pick_cost)} per million inferences vs {format_cost(best_cost)}"
    return line + "."


def cost_lines(
    ranked: Sequence[CaseResult], price_per_hour: float, cost_of: Callable[[CaseResult], float | None]
) -> list[str]:
    """The pick's cost, and the cheapest candidate within the constraints when it is another one."""
    pick = ranked[0]
    pick_cost = cost_of(pick)
    if pick_cost is None:
        return [f"Cost: the pick has no measured throughput, so no cost at {price_per_hour:g} per hour."]
    lines = [
        f"Cost: {format_cost(pick_cost)} per million inferences at {price_per_hour:g} per hour "
        f"({pick.timing.throughput or 0:,.0f} inferences/s)."
    ]
    priced = [(cost, case) for case in ranked if (cost := cost_of(case)) is not None]
    cheapest_cost, cheapest = min(priced, key=lambda item: item[0])
    if cheapest is not pick and cheapest_cost < pick_cost:
        lines.append(
            f"The cheapest candidate within the constraints is {case_label(cheapest)} at "
            f"{format_cost(cheapest_cost)} per million ({pick_cost / cheapest_cost:.2f}x cheaper than the pick, "
            f"P50 {format_ms(_p50(cheapest))} ms vs {format_ms(_p50(pick))} ms)."
        )
    return lines


def paired_margin_lines(pick: CaseResult, runner: CaseResult) -> list[str]:
    """The pick's margin over the runner-up from their interleaved rounds, when both ran in the same rounds."""
    if len(pick.timing.rounds_p50_ms) < 2 or len(pick.timing.rounds_p50_ms) != len(runner.timing.rounds_p50_ms):
        return []
    if comparison_group(pick) != comparison_group(runner):
        return []
    from infermeter.measure.interleave import paired_speedup

    margin = paired_speedup(runner.timing.rounds_p50_ms, pick.timing.rounds_p50_ms, runner.id)
    interval = f"{margin.ratio:.2f}x [{margin.ci_low:.2f}–{margin.ci_high:.2f}] over {margin.rounds} interleaved rounds"
    if margin.no_difference:
        return [f"The pick and the runner-up cannot be told apart on this machine ({interval}): either will do."]
    return [f"The pick's P50 margin over the runner-up: {interval}."]
