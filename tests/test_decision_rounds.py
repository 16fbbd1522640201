"""The sequential decision fed from live burst logs (`decision_rounds.RoundJudge`), and its verdict on a change."""

from __future__ import annotations

import math

from crafted_results import make_case
from infermeter.compare.decision import DecisionParams, decide
from infermeter.compare.decision_rounds import RoundJudge, apply_decision
from infermeter.compare.rerun import paired_change
from infermeter.compare.verdict import CaseChange, Comparison
from infermeter.core.case import MeasureSettings
from infermeter.measure.stoprule import Burst, BurstLog
from infermeter.modelci.steps import _latency_status


def _round(logs: list[BurstLog], base_ns: int, new_ns: int, shares: tuple[float, float] = (0.0, 0.0)) -> None:
    logs[0].add(Burst([base_ns] * 5, base_ns * 5, shares[0]))
    logs[1].add(Burst([new_ns] * 5, new_ns * 5, shares[1]))


def test_lopsided_rounds_are_set_aside_and_a_clear_slowdown_stops_the_rounds() -> None:
    judge = RoundJudge(DecisionParams(min_rounds=4, budget_rounds=30))
    logs = [BurstLog(MeasureSettings()), BurstLog(MeasureSettings())]
    stops = []
    for r in range(30):
        if r % 2:  # other work hit only the base side: its ratio would read 2x faster, and is set aside
            _round(logs, 2_000_000, 1_000_000, (0.6, 0.0))
        else:  # the same work on both sides cancels: counted
            _round(logs, 1_000_000 + r * 10, 1_300_000 + r * 20, (0.5, 0.5))
        stops.append(judge(logs))
        if stops[-1]:
            break
    decision = judge.decision()
    assert decision.slower and decision.rounds_used == 4 and decision.rounds_set_aside == 3
    assert len(stops) == 7  # stopped at the decision, not at the budget


def test_one_side_gone_stops_and_leaves_it_unknown() -> None:
    judge = RoundJudge(DecisionParams())
    assert judge([BurstLog(MeasureSettings())])
    assert judge.decision().outcome == "unknown"


def _pair(new_p50_ms: float) -> tuple[CaseChange, list[float]]:
    base, new = make_case("null", 1, 1.0, threads=1), make_case("null", 1, new_p50_ms, threads=1)
    base.timing.rounds_p50_ms = [1.0 + 0.01 * (i % 3) for i in range(8)]
    new.timing.rounds_p50_ms = [new_p50_ms * (1.0 + 0.01 * ((i + 1) % 3)) for i in range(8)]
    logs = [math.log(n / b) for b, n in zip(base.timing.rounds_p50_ms, new.timing.rounds_p50_ms, strict=True)]
    return paired_change(base, new, "tiny_cnn null", 0.05, 0.01), logs


def test_the_decision_is_the_verdict_and_unknown_fails_the_gate_and_check() -> None:
    change, logs = _pair(1.3)
    slower = apply_decision(change, decide(logs, DecisionParams(min_rounds=4)))
    assert slower.verdict == "slower" and slower.regression and slower.decision is not None
    assert any("GSPRT" in note for note in slower.notes)
    unknown = apply_decision(change, decide(logs[:3], DecisionParams(min_rounds=4, budget_rounds=10)))
    assert unknown.verdict == "unknown" and unknown.undecided and not unknown.regression
    comparison = Comparison("p50", 0.05, alpha=0.01, changes=[unknown], only_base=[], only_new=[], env_differences=[])
    assert comparison.undecided == [unknown] and not comparison.regressions
    assert _latency_status(unknown) == "fail" and _latency_status(slower) == "fail"
    same_change, same_logs = _pair(1.0)
    same = apply_decision(same_change, decide(same_logs, DecisionParams(min_rounds=4)))
    assert same.verdict == "same" and _latency_status(same) == "pass"


def test_a_p99_gate_says_it_gated_the_median() -> None:
    change, logs = _pair(1.3)
    judged = apply_decision(change, decide(logs, DecisionParams(min_rounds=4)), "p99")
    assert judged.decision is not None and any("P99 not gated" in note for note in judged.decision.notes)
