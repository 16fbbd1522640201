"""A race of several candidates in one interleaved group, by the sequential decision (`compare.decision`): every
pair of candidates still in the race has its own test on the per-round log-ratio of their medians, and a
candidate is dropped (no longer timed) as soon as it is decided slower than another by δ. The race ends when one
candidate is left, when every remaining pair is decided *same*, or when the rounds stop (`--max-time`).

k candidates make k(k−1)/2 tests: each runs at α / that count (Bonferroni), so that the chance of dropping a
candidate that is within δ₀ of the best stays at most α for the whole race. A round is set aside for a pair when
other work took more of the CPUs during one of the two bursts than during the other (as in `decision_rounds`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import TYPE_CHECKING

from infermeter.compare.decision import Decision, DecisionParams, SequentialTest

if TYPE_CHECKING:
    from infermeter.measure.stoprule import BurstLog


@dataclass(frozen=True)
class Drop:
    """A candidate (its index in the group) dropped from the race: decided slower than `by` (an index)."""

    index: int
    by: int
    decision: Decision


class RaceJudge:
    """`run_group`'s `until` for a race: feeds each pair's test, retires the candidates decided slower (their logs
    are marked `retired`: the group stops timing them), True once the race is over."""

    def __init__(self, params: DecisionParams, share: float | None = None) -> None:
        from infermeter.machine.interference import INTERFERENCE_SHARE

        self.params = params.checked()
        self.share = INTERFERENCE_SHARE if share is None else share
        self.tests: dict[tuple[int, int], SequentialTest] = {}
        self.count = 0  # the candidates that loaded (the group's timed cases, in plan order): set on the first round
        self.seen = 0
        self.drops: list[Drop] = []

    def _start(self, count: int) -> None:
        pairs = max(1, count * (count - 1) // 2)
        alpha = replace(self.params, alpha=self.params.alpha / pairs)  # Bonferroni over the pairs
        self.count = count
        self.tests = {pair: SequentialTest(alpha) for pair in combinations(range(count), 2)}

    @property
    def dropped(self) -> set[int]:
        """The indices dropped so far."""
        return {drop.index for drop in self.drops}

    def __call__(self, logs: Sequence[BurstLog]) -> bool:
        if not self.count:
            self._start(len(logs))
        if len(logs) != self.count or self.count < 2:
            return True  # a candidate failed mid-race, or one is left: the group's results stand as they are
        rounds = min(len(log.round_medians_ns) for i, log in enumerate(logs) if i not in self.dropped)
        while self.seen < rounds:
            self._round(logs, self.seen)
            self.seen += 1
        live = [pair for pair in self.tests if not set(pair) & self.dropped]
        return not live or all(self.tests[pair].done for pair in live)

    def _round(self, logs: Sequence[BurstLog], r: int) -> None:
        for (i, j), test in self.tests.items():
            if i in self.dropped or j in self.dropped or test.done:
                continue
            a, b = logs[i].round_medians_ns[r], logs[j].round_medians_ns[r]
            ratio = math.log(b / a) if a > 0 and b > 0 else math.nan
            disturbed = abs(logs[i].round_other_shares[r] - logs[j].round_other_shares[r]) > self.share
            decision = test.add(ratio, disturbed)
            if decision is not None and decision.outcome == "different":
                slower, faster = (j, i) if decision.direction == "slower" else (i, j)
                self.drops.append(Drop(slower, faster, decision))
                logs[slower].retired = True
