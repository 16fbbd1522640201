"""The sequential decision (`compare.decision`) on a live interleaved group of two, BASE and NEW: it is fed each
round's log(new median / base median) as the round ends, and the rounds stop as soon as it has decided.

A round is set aside when other work took more of the usable CPUs during one side's burst than during the other's,
by more than `measure.interference.INTERFERENCE_SHARE` (measured per burst in the worker): work that hits both
sides alike cancels in the round's ratio, work that hits one side biases it. On a machine busy all the time, only
the lopsided rounds go. The decision's record then goes into the pair's
`CaseChange.decision`, and its outcome becomes the change's verdict: *slower* (a regression), *faster*, *same* or
*unknown* (the budget ran out: it fails a gate, since an undecided gate must not pass silently).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from infermeter.compare.decision import Decision, DecisionParams, SequentialTest, gated_metric

if TYPE_CHECKING:
    from infermeter.compare.verdict import CaseChange
    from infermeter.measure.plan import SweepItem
    from infermeter.measure.stoprule import BurstLog
    from infermeter.results.schema import CaseResult

ItemT = TypeVar("ItemT", bound="SweepItem")


class RoundJudge:
    """`run_group`'s `until` for a group of two (BASE first): feeds each new round to the test, True once decided.
    `share`: the difference of the two sides' other-work CPU shares above which a round is set aside."""

    def __init__(self, params: DecisionParams, share: float | None = None) -> None:
        from infermeter.machine.interference import INTERFERENCE_SHARE

        self.test = SequentialTest(params)
        self.share = INTERFERENCE_SHARE if share is None else share
        self.seen = 0

    def __call__(self, logs: Sequence[BurstLog]) -> bool:
        if len(logs) < 2:
            return True  # one side is gone: nothing left to decide on
        base, new = logs[0], logs[1]
        while self.seen < min(len(base.round_medians_ns), len(new.round_medians_ns)):
            r = self.seen
            self.seen += 1
            b, n = base.round_medians_ns[r], new.round_medians_ns[r]
            ratio = math.log(n / b) if b > 0 and n > 0 else math.nan
            # Other work that hit both sides of the round alike cancels in their ratio (the point of pairing);
            # what biases the ratio is work that took more of the CPUs during one side's burst than the other's.
            disturbed = abs(base.round_other_shares[r] - new.round_other_shares[r]) > self.share
            if self.test.add(ratio, disturbed) is not None:
                return True
        return False

    def decision(self) -> Decision:
        """The decision, or `unknown` when the rounds stopped first (--max-time, or a side ended)."""
        return self.test.finish(
            f"the measurement stopped after {self.test.rounds_run} rounds (--max-time or a side ended), "
            f"before a decision or the budget of {self.test.params.budget_rounds} rounds"
        )


def decided_group(
    items: Sequence[ItemT], params: DecisionParams
) -> tuple[list[tuple[ItemT, CaseResult, dict[str, str]]], Decision | None, str | None]:
    """Measure the two items (BASE, NEW) in interleaved rounds until the decision: (results as `run_group` gives
    them, the decision, None), or ([], None, reason) when they could not be interleaved."""
    from infermeter.measure.interleave import run_group

    judge = RoundJudge(params)
    done, reason = run_group(items, lambda _i, _case, _phase: None, until=judge)
    if reason is not None:
        return [], None, reason
    return done, judge.decision(), None


def apply_decision(change: CaseChange, decision: Decision | None, metric: str = "p50") -> CaseChange:
    """The change judged by the decision: its verdict, and the record kept with it (the ratio, interval and p of
    the rounds stay, descriptive). A change that could not be measured keeps its own verdict. `metric`: the one
    asked for; the decision gates the median, and its record says why when that was another (`gated_metric`)."""
    if decision is None or change.ratio is None or change.verdict == "precision differs":
        return change
    _, why = gated_metric(metric, min(len(change.base.timing.samples_ms), len(change.new.timing.samples_ms)))
    if why:
        decision = replace(decision, notes=(*decision.notes, why))
    verdict = {"different": decision.direction or "slower", "same": "same", "unknown": "unknown"}[decision.outcome]
    notes = [n for n in change.notes if not n.startswith("within the ")]
    notes.append(decision.summary())
    notes.extend(decision.notes)
    if decision.rounds_set_aside:
        notes.append(f"{decision.rounds_set_aside} round(s) disturbed by other work were set aside")
    fields: dict[str, Any] = {
        "verdict": verdict,
        "significant": decision.outcome == "different",
        "beyond_threshold": decision.outcome == "different",
        "decision": decision,
        "notes": notes,
    }
    return replace(change, **fields)
