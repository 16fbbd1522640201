"""The finalists' race (`decision_race.RaceJudge`) on crafted burst logs, and what optimize's pool makes of a drop."""

from __future__ import annotations

import numpy as np

from infermeter.compare.decision import DecisionParams
from infermeter.compare.decision_race import RaceJudge
from infermeter.core.case import MeasureSettings
from infermeter.measure.stoprule import Burst, BurstLog


def _race(
    slowdowns: list[float], rounds: int = 60, seed: int = 0, noise: float = 0.01
) -> tuple[RaceJudge, list[BurstLog], int]:
    """Candidates `slowdowns` (fractions over the first) timed in rounds until the judge stops; (judge, logs,
    rounds run)."""
    rng = np.random.default_rng(seed)
    judge = RaceJudge(DecisionParams(min_rounds=4, budget_rounds=rounds))
    logs = [BurstLog(MeasureSettings()) for _ in slowdowns]
    for r in range(rounds):
        machine = 1.0 + 0.2 * np.sin(r / 3)  # the machine drifts by ±20%: every candidate of a round alike
        for log, slowdown in zip(logs, slowdowns, strict=True):
            if not log.retired:
                ns = int(1e6 * machine * (1 + slowdown) * np.exp(rng.normal(0, noise)))
                log.add(Burst([ns] * 5, ns * 5))
        if judge(logs):
            return judge, logs, r + 1
    return judge, logs, rounds


def test_a_clearly_slower_finalist_is_dropped_and_stops_being_timed() -> None:
    # Noisy enough (and a seed) that the two equal ones take longer to be told the same than the slow one to be
    # dropped: the rounds after its drop time only them.
    judge, logs, rounds = _race([0.0, 0.0, 0.6], noise=0.03, seed=3)
    assert judge.dropped == {2}
    (drop,) = judge.drops
    assert drop.by in (0, 1) and drop.decision.slower
    assert logs[2].retired and len(logs[2].round_medians_ns) < len(logs[0].round_medians_ns)
    assert rounds < 60  # the two equal ones were decided the same: the race ended before its budget


def test_the_best_is_kept_whatever_its_place_in_the_group() -> None:
    judge, _, _ = _race([0.2, 0.0, 0.25])
    assert judge.dropped == {0, 2}


def test_the_race_shares_alpha_over_its_pairs() -> None:
    judge = RaceJudge(DecisionParams(alpha=0.03, min_rounds=4, budget_rounds=10))
    judge([BurstLog(MeasureSettings()) for _ in range(3)])
    assert {test.params.alpha for test in judge.tests.values()} == {0.01}
