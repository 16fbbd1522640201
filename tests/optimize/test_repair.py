"""A reduced precision that missed its accuracy budget is repaired unless it is decided slower than the best
admissible case on paired rounds (`optimize.repair`): real interleaved rounds of the `null` engine, whose latency
is set, so the answer is known."""

from __future__ import annotations

from dataclasses import replace

from crafted_results import make_case
from infermeter.core.case import Case, MeasureSettings
from infermeter.models.resolve import resolve_model
from infermeter.optimize.repair import paired_decision, repair_prune_reason
from infermeter.results.schema import CaseResult

SETTINGS = MeasureSettings(
    warmup_iterations=2, min_iterations=5, min_time_s=0.05, max_time_s=10.0, rounds=2, target_ci=0.0
)


def _measured(latency_ms: str, p50_ms: float) -> tuple[Case, CaseResult]:
    case = Case("tiny_cnn", "null", threads=1, options=(("null.latency_ms", latency_ms),), settings=SETTINGS)
    return case, replace(make_case("null", 1, p50_ms), id=case.id)


def test_a_candidate_half_again_slower_is_decided_slower_and_one_as_fast_is_not() -> None:
    spec = resolve_model("tiny_cnn")
    best_case, best = _measured("2", 2.0)
    slow_case, slow = _measured("3", 3.0)
    twin_case, twin = _measured("2.0", 2.1)  # the same latency, measured minutes later a little slower
    sources = {c.id: (spec, c) for c in (best_case, slow_case, twin_case)}
    decision, why = paired_decision(sources, best, slow)
    assert why is None and decision is not None and decision.slower, decision
    decision, why = paired_decision(sources, best, twin)
    assert why is None and decision is not None and not decision.slower, decision.summary()
    assert decision.outcome in ("same", "unknown")


def test_a_case_measured_by_an_earlier_invocation_cannot_be_paired() -> None:
    _case, best = _measured("2", 2.0)
    decision, why = paired_decision({}, best, best)
    assert decision is None and why is not None and "earlier invocation" in why


def test_no_best_yet_or_a_lower_p50_is_repaired_without_measuring() -> None:
    _case, best = _measured("2", 2.0)
    _slow_case, slow = _measured("3", 3.0)
    # No Run is needed: neither path measures anything (a Run would be needed only to measure the pair).
    assert repair_prune_reason(None, slow, None) is None  # type: ignore[arg-type]  # nothing admissible, --no-prune
    assert repair_prune_reason(None, best, slow) is None  # type: ignore[arg-type]  # faster than the best
