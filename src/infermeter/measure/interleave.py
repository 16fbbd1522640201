"""Interleaved rounds: the cases of one comparison group timed in turns, so that the machine's drift hits them all.

Every case of a group is loaded in its own worker (isolation, load time and peak memory as in a sequential
sweep). The timed loop is then split into rounds; each round runs every case for one burst (`--min-time` spread
over `--rounds` bursts, after one untimed re-warming run), one worker at a time while the others wait blocked on
their pipe; the next burst starts only once the last worker's thread pools have stopped spinning. The order changes
between rounds: a shuffle drawn from `--seed` on even rounds, its reverse on odd ones, so that over each pair of
rounds every case sits in mirrored positions (an ABBA design: a trend within a round cancels). Rounds go on, past
`--rounds`, until every case meets the stop rule and every paired speedup's interval is within ±2×`--target-ci`,
or one case reaches `--max-time`, or `MAX_ROUNDS` rounds have run. A caller that decides by a sequential rule
(`decision_rounds`) passes `until` instead: rounds then go on until it says stop (or `--max-time`, or a case ends).

Per round, the ratio baseline median / case median is one paired observation of the speedup: a change in the
machine's speed between rounds cancels in it. The speedup is their geometric mean with a 95% Student-t interval
on the log ratios (rounds are the replicates: Kalibera & Jones, ISMM 2013).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TypeVar

import numpy as np

from infermeter.build.case_build import BuildOutcome
from infermeter.machine.speed_probe import SpeedTrace
from infermeter.measure.burstworker import BurstWorker, WorkerEnded
from infermeter.measure.plan import SweepCase, SweepItem
from infermeter.measure.stoprule import BurstLog, StopState
from infermeter.results.schema import CaseResult, PairedSpeedup

# Thread pools spin for a while after their work ends (OpenMP's block time, ONNX Runtime's spinning: about 50 ms
# of one core here), and the next case must not start on cores that are still burning: after each burst the
# coordinator waits until the worker's CPU time stops growing, polling at this interval (the kernel's tick).
IDLE_POLL_S = 0.01
# Rounds at most. A model of microseconds needs hundreds of 20 ms bursts to reach --max-time, and every round pays
# the workers' hand-over and the speed probe (about a second for five cases on two cores): the digits CNN ran 575
# rounds, ten minutes, for ten seconds of timing per case. 200 bursts are plenty for a median and its interval.
MAX_ROUNDS = 200


# One untimed iteration at the start of each burst: after a pause, caches and thread pools are cold again. Not
# for a case whose iteration is longer than half a burst: its cold penalty is a small part of one iteration,
# and a re-warming run would double what each round costs it.
def _rewarm(log: BurstLog, burst_s: float) -> int:
    last = log.round_medians_ns[-1] / 1e9 if log.round_medians_ns else 0.0
    return 1 if last < burst_s / 2 else 0


# Keep this much memory free beyond the group's workers before loading another (else: sequential, said so).
MEMORY_MARGIN_MB = 512.0

PhaseFn = Callable[[int, SweepCase, str], None]
# After each round, with the live cases' burst logs in plan order: True to stop (a sequential decision is made).
UntilFn = Callable[[Sequence[BurstLog]], bool]
# Any kind of plan item (inference `PlanItem`, generation `GenerationItem`): the results come back with their own.
ItemT = TypeVar("ItemT", bound=SweepItem)


@dataclass
class Arm:
    """One case of a group in flight: its plan item, the case that loaded (after any fallback), its worker."""

    index: int
    item: SweepItem
    _: KW_ONLY  # the rest by keyword
    case: SweepCase
    worker: BurstWorker
    log: BurstLog
    skipped: dict[str, str] = field(default_factory=dict)
    ended: CaseResult | None = None  # set when the worker failed or died between bursts


def round_orders(count: int, seed: int) -> Iterator[list[int]]:
    """The order of the `count` cases in each round, without end: shuffled on even rounds, reversed on odd."""
    rng = random.Random(seed)
    order = list(range(count))
    for r in itertools.count():
        if r % 2 == 0:
            rng.shuffle(order)
        else:
            order.reverse()
        yield list(order)


def paired_speedup(base_medians: Sequence[float], case_medians: Sequence[float], baseline_id: str) -> PairedSpeedup:
    """The geometric mean of the per-round ratios base / case with its 95% t-interval (a point with no width
    from a single round)."""
    from scipy.stats import t

    logs = np.log(np.asarray(base_medians, dtype=np.float64)) - np.log(np.asarray(case_medians, dtype=np.float64))
    n = len(logs)
    mean = float(logs.mean())
    half = float(t.ppf(0.975, n - 1) * logs.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    return PairedSpeedup(baseline_id, math.exp(mean), math.exp(mean - half), math.exp(mean + half), n)


def attach_paired(results: Sequence[CaseResult]) -> None:
    """Give every ok case after the first ok one its paired speedup over that baseline, from their round medians."""
    measured = [r for r in results if r.ok and len(r.timing.rounds_p50_ms) >= 2]
    if len(measured) < 2:
        return
    base = measured[0]
    for case in measured[1:]:
        count = min(len(base.timing.rounds_p50_ms), len(case.timing.rounds_p50_ms))
        case.timing.paired = paired_speedup(
            base.timing.rounds_p50_ms[:count], case.timing.rounds_p50_ms[:count], base.id
        )


def _load(
    index: int, item: SweepItem, on_phase: PhaseFn, builds: Mapping[str, BuildOutcome]
) -> tuple[Arm | None, CaseResult | None, dict[str, str]]:
    """Start the item's chain until one case loads: (arm, None, skipped) or (None, last result, skipped)."""
    skipped: dict[str, str] = {}
    result: CaseResult | None = None
    for position, case in enumerate(item.chain):
        result = item.unrunnable(position, builds.get(case.id))
        if result is None:

            def phase(name: str, c: SweepCase = case) -> None:
                on_phase(index, c, name)

            worker = item.worker(position, phase, builds.get(case.id))
            result = worker.wait_ready()
            if result is None:
                return (
                    Arm(index, item, case=case, worker=worker, log=BurstLog(case.settings), skipped=skipped),
                    None,
                    skipped,
                )
        skipped[case.backend] = f"{result.status}: {result.error}"
    return None, result, skipped


def _memory_short(arms: Sequence[Arm]) -> bool:
    """True when another worker of the largest size so far would not fit in the available memory."""
    import psutil

    largest = max(arm.worker.rss_mb() for arm in arms)
    return psutil.virtual_memory().available / 2**20 < largest + MEMORY_MARGIN_MB


def _run_rounds(arms: list[Arm], on_phase: PhaseFn, trace: SpeedTrace | None, until: UntilFn | None = None) -> None:
    settings = arms[0].case.settings
    for r, order in enumerate(round_orders(len(arms), settings.seed), start=1):
        for i in order:
            arm = arms[i]
            if arm.ended is not None or arm.log.retired:
                continue
            on_phase(arm.index, arm.case, f"round {r}")
            try:
                arm.log.add(arm.worker.burst(settings.burst_s, settings.burst_s, 1, _rewarm(arm.log, settings.burst_s)))
            except WorkerEnded as ended:
                arm.ended = ended.result
            arm.worker.wait_until_idle(IDLE_POLL_S)
        if trace is not None:
            trace.read()
        live = [arm for arm in arms if arm.ended is None]
        states = [arm.log.state() for arm in live]
        if not states or any(s.stopped_by == "max_time" for s in states):
            return
        # A case whose stop rule is met reads `rule` from then on, never `max_time`: --max-time bounds the rounds
        # of a decision (`until`) by the timed seconds themselves, or tied cases would run to the judge's budget.
        if any(s.elapsed_s >= arm.case.settings.max_time_s for s, arm in zip(states, live, strict=True)):
            return
        if until is not None:
            if len(live) < len(arms) or until([arm.log for arm in live]):
                return
            continue
        if r >= settings.rounds and all(s.stopped_by for s in states) and _speedups_precise(live, settings.target_ci):
            return
        if r >= max(MAX_ROUNDS, settings.rounds):
            return


def _speedups_precise(live: list[Arm], target: float) -> bool:
    """True when every case's paired speedup over the first is known to ±2×`target` (95% interval): the rounds
    go on for the comparison, not only for each case's own median (no target: always true). Twice the target,
    because a ratio carries the noise of both its medians (√2 as much for equal noise) and a round's median
    rests on a few samples."""
    if target <= 0 or len(live) < 2:
        return True
    target *= 2
    base = live[0].log.round_medians_ns
    for arm in live[1:]:
        count = min(len(base), len(arm.log.round_medians_ns))
        paired = paired_speedup(base[:count], arm.log.round_medians_ns[:count], "")
        if max(paired.ci_high / paired.ratio - 1, 1 - paired.ci_low / paired.ratio) > target:
            return False
    return True


def run_group(
    items: Sequence[ItemT],
    on_phase: PhaseFn,
    trace: SpeedTrace | None = None,
    builds: Mapping[str, BuildOutcome] | None = None,
    until: UntilFn | None = None,
) -> tuple[list[tuple[ItemT, CaseResult, dict[str, str]]], str | None]:
    """Load every item's case (from its artifact in `builds`, by case id), time them in interleaved rounds, finish
    them: (item, result, skipped backends) in plan order, and None; or ([], reason) when the workers would not fit
    in memory (nothing measured, all stopped: the caller then runs the group sequentially). `until`: the stop rule
    of the rounds instead of --rounds and --target-ci (see the module's docstring)."""
    arms: list[Arm] = []
    done: list[tuple[ItemT, CaseResult, dict[str, str]]] = []
    try:
        for index, item in enumerate(items):
            if arms and index < len(items) and _memory_short(arms):
                for arm in arms:
                    arm.worker.kill()
                return [], "interleaving off for this group: its workers would not fit in the available memory"
            loaded, failed, skipped = _load(index, item, on_phase, builds or {})
            if loaded is not None:
                arms.append(loaded)
            elif failed is not None:
                done.append((item, failed, skipped))
        if arms:
            _run_rounds(arms, on_phase, trace, until)
    except BaseException:
        for arm in arms:
            arm.worker.kill()
        raise
    for arm in arms:
        state = arm.log.state()
        if not state.stopped_by:
            # Stopped by `until` (a decision was made), or by the round cap: only the cap is --max-time's doing.
            stopped_by = "rule" if until is not None else "max_time"
            state = StopState(state.iterations, state.elapsed_s, state.p50_halfwidth, stopped_by)
        result = arm.ended or arm.worker.finish(state, interleaved=True)
        done.append((items[arm.index], result, arm.skipped))
    done.sort(key=lambda entry: items.index(entry[0]))
    attach_paired([result for _, result, _ in done])
    return done, None
