"""Step 5c of optimize: the finalists measured again together.

Every candidate was measured on its own, minutes apart from the others, and this kind of machine's speed drifts by
tens of percent over minutes: on resnet18 the same OpenVINO FP32 configuration measured 17.7, 31.3 and 19.4 ms in
three runs, which decided the pick. So the best few admissible candidates (by the first measurement, under the
constraints) run once more as one interleaved group (`measure.interleave.run_group`): every round times each of
them within a fraction of a second, and the pick rests on figures measured in the same machine state.

The re-measured copies are cases of their own in the results file (tagged with the option `optimize.round`, which
no backend reads, so that their ids differ from the originals'), and they carry their original's accuracy and
parity evidence: the same graph on the same engine. The advice then ranks the copies in place of their originals;
the admissible candidates that were not finalists are out, "eliminated in the first round", since each was slower
than every finalist when first measured. What the advice and the deployment record is the original case's
identity with the group's figures (`deployable`).

With the latency objective the group is a race (`decision_race`): every pair of finalists has a sequential test
on their per-round ratios (`RACE`: δ 5%, α 0.01 over the whole race, β 0.05), a finalist decided slower than
another by δ stops being timed and is out ("dropped in the race"), and the group ends once one is left or the rest
are decided the same. Throughput is not raced: a round's medians are latencies, which rank candidates of
different batch sizes the wrong way.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from infermeter.advise.pick import Exclusion, advise
from infermeter.compare.decision import DecisionParams
from infermeter.optimize.candidates import (
    GROUP_CASE_OVERHEAD_S,
    GROUP_TIME_FACTOR,
    evidence_reason,
)
from infermeter.optimize.pipeline import FINALIST_TAG, Run, case_variant_label, remeasured_item
from infermeter.optimize.steps.log import begin, finish, note, skip
from infermeter.results.records import Accuracy, AccuracyError, OptimizeStep, ParityRecord, read_record, write_record
from infermeter.results.schema import CaseResult

if TYPE_CHECKING:
    from infermeter.compare.decision_race import RaceJudge

# Objectives a group's timed rounds decide; peak memory does not drift with the machine's speed.
TIMED_OBJECTIVES = ("latency", "throughput")
# The race's decision: the 5% pick tolerance as δ; no budget but the group's --max-time (MAX_ROUNDS).
RACE = DecisionParams(budget_rounds=200)


def first_round(run: Run) -> list[CaseResult]:
    """The admissible candidates (with accuracy evidence, within the constraints) ranked by the objective on their
    first measurement; the finalists' copies left out."""
    trusted = [case for case in run.measured() if not evidence_reason(case, run.spec.default_precision)]
    request = run.request
    return advise(trusted, request.constraints(), request.objective, request.price_per_hour).ranked


def _skip_reason(run: Run, ranked: list[CaseResult]) -> str | None:
    request = run.request
    if request.finalists < 2:
        return "--finalists below 2: the pick is the first measurement's best"
    if request.objective not in TIMED_OBJECTIVES:
        return f"the objective is {request.objective}, which timed rounds do not decide"
    if request.cluster or request.machine:
        return "on a cluster each case runs on its own node: there is no group to interleave"
    if len([c for c in ranked if c.id in run.sources]) < 2:
        return "fewer than 2 admissible candidates"
    return None


def step_finalists(run: Run) -> None:
    """5c. Measure the best `--finalists` admissible candidates again, interleaved in one group."""
    why = (
        "candidates measured minutes apart carry the machine's drift between them: the best few are measured again "
        "together, in interleaved rounds, and the pick is decided on those figures"
    )
    begin(run, "finalists", why)
    run.budget.release_reserve()  # kept for this step since the start
    ranked = first_round(run)
    reason = _skip_reason(run, ranked)
    if reason:
        skip(run, "finalists", "re-measuring the finalists together", reason)
        finish(run, "finalists", "skipped")
        return
    details = run.journal.details("finalists")
    if _measured_earlier(run, details):
        # Resumed: the group stands as it was measured. Not chosen again: a resumed run's steps may not rebuild
        # every case they measured before (Run.sources), and the same pick is what the later steps resume from.
        note(run, "finalists", "resumed: the finalists were measured together earlier")
        finish(run, "finalists")
        return
    finalists = [c for c in ranked if c.id in run.sources][: run.request.finalists]
    timed_s, reason = _time_per_finalist_s(run, len(finalists))
    if reason:
        skip(run, "finalists", "re-measuring the finalists together", reason)
        finish(run, "finalists", "skipped")
        return
    raced = _measure_together(run, finalists, timed_s)
    if raced is None:
        finish(run, "finalists", "skipped")
        return
    copies, dropped = raced
    eliminated = [c for c in ranked if c.id not in {f.id for f in finalists}]
    details.update(
        {
            "originals": [c.id for c in finalists],
            "copies": [c.id for c in copies],
            "eliminated": [c.id for c in eliminated],
            "dropped": dropped,
        }
    )
    for line in [*_summary(finalists, copies, run.request.objective), *dropped.values()]:
        note(run, "finalists", line)
    finish(run, "finalists")


def _measured_earlier(run: Run, details: dict[str, object]) -> bool:
    """Whether an earlier invocation measured the group: its originals and copies all in the results file."""
    originals, copies = details.get("originals"), details.get("copies")
    if not isinstance(originals, list) or not isinstance(copies, list) or len(originals) != len(copies):
        return False
    return all(run.journal.case(case_id) is not None for case_id in [*originals, *copies])


def _time_per_finalist_s(run: Run, count: int) -> tuple[float, str | None]:
    """How long each finalist is timed: GROUP_TIME_FACTOR x --min-time (within --max-time), less when the budget
    has less left (the steps before may overrun the reserve: each case is admitted on an estimate); the reason
    when not even --min-time each fits."""
    settings = run.request.settings
    wanted_s = min(settings.max_time_s, max(GROUP_TIME_FACTOR * settings.min_time_s, settings.min_time_s))
    fits_s = run.budget.remaining_s() / count - GROUP_CASE_OVERHEAD_S
    if fits_s < settings.min_time_s:
        estimate_s = count * (settings.min_time_s + GROUP_CASE_OVERHEAD_S)
        source = f"--min-time and {GROUP_CASE_OVERHEAD_S:g} s to start each of {count}"
        return 0.0, run.budget.work_reason("the finalists' group", estimate_s, source)
    return min(wanted_s, fits_s), None


def _measure_together(
    run: Run, finalists: list[CaseResult], timed_s: float
) -> tuple[list[CaseResult], dict[str, str]] | None:
    """The finalists' copies, each timed for at most `timed_s`, measured as one interleaved group (first-round
    best first: the paired ratios are over it), raced for the latency objective; with the copies dropped in the
    race (copy id -> why). None when the group could not run (the reason is in the journal)."""
    from infermeter.compare.decision_race import RaceJudge
    from infermeter.measure.interleave import run_group

    items = [remeasured_item(run.sources[case.id], FINALIST_TAG, timed_s) for case in finalists]
    labels = ", ".join(case_variant_label(c) for c in finalists)
    note(run, "finalists", f"measuring {len(items)} finalists together, each timed for up to {timed_s:.1f} s: {labels}")
    judge = (
        RaceJudge(replace(RACE, min_rounds=min(max(2, run.request.settings.rounds), RACE.budget_rounds)))
        if _raced(run)
        else None
    )
    done, reason = run_group(items, lambda _index, _case, phase: None, until=judge)
    if reason is not None:
        skip(run, "finalists", "re-measuring the finalists together", reason)
        return None
    copies = []
    for (_item, copy, _skipped), original in zip(done, finalists, strict=True):
        for record_type in (Accuracy, AccuracyError, ParityRecord):
            record = read_record(original, record_type)
            if record is not None:
                write_record(copy, record)
        first = read_record(original, OptimizeStep)
        write_record(copy, OptimizeStep("finalists", first.variant if first else "", first.artifact if first else None))
        # A copy's id is its original's with the tag: measured again (a group interrupted earlier), it replaces.
        run.results.cases[:] = [c for c in run.results.cases if c.id != copy.id] + [copy]
        run.journal.add_case("finalists", copy.id)
        copies.append(copy)
    run.save()
    return copies, _dropped(judge, copies)


def _raced(run: Run) -> bool:
    return run.request.objective == "latency"


def _dropped(judge: RaceJudge | None, copies: list[CaseResult]) -> dict[str, str]:
    """Copy id -> why, for the copies the race dropped (the judge's indices are over the copies that were timed)."""
    if judge is None:
        return {}
    timed = [copy for copy in copies if copy.timing.rounds_p50_ms]
    return {
        timed[d.index].id: f"{case_variant_label(timed[d.index])}: dropped in the race, decided slower than "
        f"{case_variant_label(timed[d.by])}: {d.decision.summary()}"
        for d in judge.drops
    }


def _summary(finalists: list[CaseResult], copies: list[CaseResult], objective: str) -> list[str]:
    """One line per finalist: its first and its group figures, and its paired ratio over the first-round best."""
    lines = []
    for original, copy in zip(finalists, copies, strict=True):
        label = case_variant_label(original)
        if not copy.ok or copy.latency_ms is None or original.latency_ms is None:
            lines.append(f"{label}: {copy.status} when measured again ({copy.error})")
            continue
        text = f"{label}: P50 {original.latency_ms.p50:.3g} ms first, {copy.latency_ms.p50:.3g} ms together"
        if copy.timing.paired is not None:
            paired = copy.timing.paired
            text += (f"; {paired.ratio:.3f}x the first-round best's speed [{paired.ci_low:.3f}, {paired.ci_high:.3f}] "
                     f"over {paired.rounds} paired rounds")  # fmt: skip
        lines.append(text)
    best = min((c for c in copies if c.ok), key=lambda c: _rank_value(c, objective), default=None)
    if best is not None and best is not copies[0] and copies[0].ok:
        lines.append(f"The group reorders the first measurement: {case_variant_label(best)} is ahead of "
                     f"{case_variant_label(copies[0])}, the first round's best")  # fmt: skip
    return lines


def _rank_value(case: CaseResult, objective: str) -> float:
    if objective == "throughput":
        return -(case.timing.throughput or 0.0)
    return case.latency_ms.p50 if case.latency_ms else float("inf")


def deployable(copy: CaseResult, original: CaseResult) -> CaseResult:
    """The finalist's copy as the advice ranks it and the deployment records it: the original case's identity
    (id, options: what `serve` and `deploy` load) with the figures measured in the group."""
    return replace(copy, id=original.id, options=dict(original.options))


def final_pool(run: Run, cases: list[CaseResult]) -> tuple[list[CaseResult], list[Exclusion]]:
    """The cases the advice ranks after the finalists' step: each finalist's copy (as `deployable`) in place of
    its original, the other admissible candidates out as eliminated. Unchanged when the step did not run."""
    details = (run.journal.step("finalists") or {}).get("details", {})
    originals, copy_ids = details.get("originals", []), details.get("copies", [])
    copies = [run.journal.case(case_id) for case_id in copy_ids]
    if not originals or len(copies) != len(originals) or any(c is None for c in copies):
        return cases, []
    by_id = {c.id: c for c in cases}
    eliminated = set(details.get("eliminated", []))
    dropped: dict[str, str] = details.get("dropped", {})
    pool = [c for c in cases if c.id not in eliminated and c.id not in originals]
    pairs = [(copy, original) for copy, original in zip(copies, originals, strict=True) if copy and original in by_id]
    pool += [deployable(copy, by_id[original]) for copy, original in pairs if copy.id not in dropped]
    reason = (f"not a finalist: slower than the {len(originals)} best when first measured, so not measured again "
              "with them")  # fmt: skip
    out = [Exclusion(by_id[i], [reason]) for i in details.get("eliminated", []) if i in by_id]
    return pool, out + [
        Exclusion(by_id[original], [dropped[copy.id]]) for copy, original in pairs if copy.id in dropped
    ]


def finalists_lines(run: Run, pick: CaseResult | None, runner_up: CaseResult | None) -> list[str]:
    """What the advice owes to the finalists' step: how many were measured together and, when both the pick and
    the runner-up were finalists, the pick's paired margin over it (empty when the step did not run). The advice
    quotes that margin itself for two cases of one comparison group; this says it for finalists of different
    models too (an engine's INT8 file against the FP32 model), which ran in the same rounds all the same."""
    from infermeter.report.groups import comparison_group

    details = (run.journal.step("finalists") or {}).get("details", {})
    originals = details.get("originals", [])
    if not originals or pick is None or pick.id not in originals:
        return []
    rounds = len(pick.timing.rounds_p50_ms)
    lines = [f"Decided among the {len(originals)} best admissible candidates measured again together, in {rounds} "
             f"interleaved rounds; {len(details.get('eliminated', []))} other admissible candidate(s) were slower "
             "when first measured."]  # fmt: skip
    if runner_up is None or runner_up.id not in originals or comparison_group(pick) == comparison_group(runner_up):
        return lines
    if rounds >= 2 and len(runner_up.timing.rounds_p50_ms) == rounds:
        from infermeter.measure.interleave import paired_speedup

        margin = paired_speedup(runner_up.timing.rounds_p50_ms, pick.timing.rounds_p50_ms, runner_up.id)
        verdict = "they cannot be told apart on this machine: either will do" if margin.no_difference else (
            "the pick is faster" if margin.ratio > 1 else "the runner-up is faster round by round, although its P50 "
            "over all the group's samples is higher")  # fmt: skip
        lines.append(f"The pick's speed over the runner-up's, paired over those rounds: {margin.ratio:.3f}x "
                     f"[{margin.ci_low:.3f}, {margin.ci_high:.3f}]: {verdict}.")  # fmt: skip
    return lines
