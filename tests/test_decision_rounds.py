"""The sequential decision fed from live burst logs (`decision_rounds.RoundJudge`), and its verdict on a change."""

from __future__ import annotations

from infermeter.case import MeasureSettings
from infermeter.decision import DecisionParams
from infermeter.decision_rounds import RoundJudge
from infermeter.measure.stoprule import Burst, BurstLog


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
