"""tune-batching's pick decided against its runner-up on paired rounds (`compare.decision`), not on two curves
measured minutes apart on a machine whose speed drifts.

Both policies are served at once, each at the concurrency of its best point within the SLO. A round is one short
closed-loop run on each, in ABBA order over pairs of rounds, so a change of the machine's speed hits both; its
observation is log(pick's throughput / runner-up's), the runner-up's time per request over the pick's. The GSPRT
stops as soon as it is decided: the runner-up *slower* (the pick stands), *faster* by δ (it becomes the pick),
*same* within δ₀ (the pick stands, and the record says the two are equivalent), or *unknown* when the budget of
rounds runs out (the pick stands, on its curve alone, and the record says so). A round whose run had failed or
unanswered requests is set aside.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from infermeter.compare.decision import Decision, DecisionParams, SequentialTest
from infermeter.load.driver import RunSettings, run_once
from infermeter.load.target import LoadTarget, prepare_target
from infermeter.load.tune import PolicyResult
from infermeter.load.verdict import summarize
from infermeter.serve.server import spawn_server

# A wrong "different" swaps the pick for an equivalent policy (cheap); a miss keeps one 5% slower: α 5%, β 5%.
RACE_PARAMS = DecisionParams(alpha=0.05, beta=0.05, delta=0.05, min_rounds=6, budget_rounds=20)
RACE_WARMUP_S = 0.2


@dataclass(frozen=True)
class PickRace:
    """The race of the pick (`pick`, after the race) against the runner-up (`other`): the decision, in which NEW is
    the runner-up and BASE the pick as the curves chose it, and whether the runner-up took its place."""

    pick: PolicyResult
    other: PolicyResult
    decision: Decision
    swapped: bool

    def line(self) -> str:
        """One line for the console: who raced, the outcome and why it stopped."""
        d = self.decision
        if self.swapped:
            verdict = f"{self.pick.policy.label()} is faster by δ or more: it becomes the pick"
        elif d.outcome == "different":
            verdict = f"{self.pick.policy.label()} stands: the runner-up is slower"
        elif d.outcome == "same":
            verdict = f"{self.pick.policy.label()} stands: the two are the same within δ₀ (either will do)"
        else:
            verdict = f"{self.pick.policy.label()} stands on its curve alone: undecided within the budget"
        return f"paired rounds against the runner-up: {verdict}; {d.summary()}"


def runner_up(results: list[PolicyResult], pick: PolicyResult) -> PolicyResult | None:
    """The policy whose best point within the SLO comes next after the pick's (None: no other met it)."""
    others = [r for r in results if r is not pick and r.best is not None]
    return max(others, key=lambda r: r.best.throughput if r.best else 0.0, default=None)


def _throughput(target: LoadTarget, result: PolicyResult, round_s: float, slo_p99_ms: float) -> float:
    """One closed-loop run at the policy's best concurrency: its throughput, NaN when a request failed."""
    assert result.best is not None
    concurrency = result.best.run.concurrency or 1  # a closed-loop point always has one
    run = run_once(target, RunSettings("offline", round_s, concurrency=concurrency, warmup_s=RACE_WARMUP_S))
    summary = summarize(run, slo_p99_ms, target.batch)
    return summary.throughput if not run.errors and summary.throughput > 0 else math.nan


def race_rounds(
    measure: Callable[[int], float],
    params: DecisionParams = RACE_PARAMS,
    on_round: Callable[[int, float], None] | None = None,
) -> Decision:
    """Rounds until decided: `measure(side)` is one run's throughput of side 0 (BASE, the pick) or 1 (NEW, the
    runner-up), NaN for a failed run; each round runs both, in ABBA order over pairs of rounds."""
    test = SequentialTest(params, metric="throughput")
    while not test.done:
        index = test.rounds_run
        order = (0, 1) if index % 4 in (0, 3) else (1, 0)
        rates = {side: measure(side) for side in order}
        log_ratio = math.log(rates[0] / rates[1]) if rates[0] > 0 and rates[1] > 0 else math.nan
        test.add(log_ratio)
        if on_round is not None:
            on_round(index + 1, log_ratio)
    return test.finish("budget spent")


def race_pick(
    results: list[PolicyResult],
    pick: PolicyResult,
    model_args: list[str],
    slo_p99_ms: float,
    round_s: float,
    params: DecisionParams = RACE_PARAMS,
    on_round: Callable[[int, float], None] | None = None,
) -> PickRace | None:
    """Race the pick against its runner-up (module docstring), both served here; None when no other policy met the
    SLO."""
    other = runner_up(results, pick)
    if other is None:
        return None
    sides = (pick, other)
    servers = [spawn_server([*model_args, *r.policy.serve_args(), "--max-queue", "4096"]) for r in sides]
    try:
        targets = [prepare_target(server.url) for server in servers]
        decision = race_rounds(
            lambda side: _throughput(targets[side], sides[side], round_s, slo_p99_ms), params, on_round
        )
    finally:
        for server in servers:
            server.stop()
    return race_outcome(pick, other, decision)


def race_outcome(pick: PolicyResult, other: PolicyResult, decision: Decision) -> PickRace:
    """The race's record: the runner-up takes the pick's place only when decided faster by δ."""
    swapped = decision.outcome == "different" and decision.direction == "faster"
    return PickRace(other if swapped else pick, pick if swapped else other, decision, swapped)
