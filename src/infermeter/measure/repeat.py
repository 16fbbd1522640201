"""Repetition across processes (`bench --repeat N`): every case of the plan runs in N fresh worker processes spread
over the run, and its statistics use the processes as replicates.

The sweep passes over the whole plan N times (`measure.sweep.run_sweep`); each pass runs every case once more, in a
new process, so that the machine's drift over the run reaches every case alike (round robin), and a process-level
effect (memory layout, thread placement, the engine's start-up choices, which persist for a process's life) is
sampled N times instead of once. A comparison group is interleaved within each pass, as without --repeat: each pass
loads the group's cases in fresh workers and times them in rounds.

The case in the results file is the merge of its processes: one `processes` record (`ProcessRun` per process),
the samples pooled (P90, P99, the tail), and the P50 with its interval from the process medians
(`stats.replicate_p50`). A paired speedup in a group becomes the geometric mean of the per-pass ratios of process
medians (each a ratio of two medians timed interleaved, in the same pass), with its t interval over the passes.
The case enters the file after its first process and is rewritten after each further one, so an interrupted run
keeps what it measured and `bench --resume` runs only the missing processes.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from infermeter.measure.plan import PlanItem, SweepItem
from infermeter.results.records import ProcessRecord, ProcessRun, read_record, write_record
from infermeter.results.schema import CaseResult, CaseWarning, ResultsFile


def passes_of(plan: Sequence[SweepItem]) -> int:
    """How many passes a sweep of `plan` makes: the largest --repeat among its items (1 without)."""
    return max((item.case.settings.repeat for item in plan), default=1)


def _recorded(item: SweepItem, done: Mapping[str, CaseResult]) -> CaseResult | None:
    return next((done[case.id] for case in item.chain if case.id in done), None)


def process_count(case: CaseResult) -> int:
    """How many processes a recorded case has run in (1 for a case without a `processes` record)."""
    record = read_record(case, ProcessRecord)
    return 1 if record is None else len(record.runs)


def item_for_pass(item: SweepItem, done: Mapping[str, CaseResult], index: int) -> SweepItem | None:
    """What pass `index` (0 first) runs of `item`, given the cases recorded so far by id: the whole item in the first
    pass when it has no result yet; in a later pass, only the case of its chain that ran (a fallback is not tried
    again), when its first process measured it and it has `index` processes so far. None: nothing to run."""
    recorded = _recorded(item, done)
    if index == 0:
        return item if recorded is None else None
    if recorded is None or index >= item.case.settings.repeat:
        return None
    record = read_record(recorded, ProcessRecord)
    if record is None or len(record.runs) != index:
        return None  # not repeated (its first process failed), or already has this pass
    if not isinstance(item, PlanItem):
        return item  # a generation item: one case, no fallback chain to narrow
    ran = next(case for case in item.chain if case.id == recorded.id)
    return item if item.chain == (ran,) else PlanItem(item.spec, (ran,))


def wants_more(item: SweepItem, done: Mapping[str, CaseResult]) -> bool:
    """True when `item` has no result yet, or fewer processes than its --repeat asks (and its first one ran)."""
    recorded = _recorded(item, done)
    if recorded is None:
        return True
    record = read_record(recorded, ProcessRecord)
    return record is not None and len(record.runs) < item.case.settings.repeat


def store_result(results: ResultsFile, result: CaseResult, repeat: int) -> CaseResult:
    """Put one process's `result` into `results`: appended when the case is new (with a `processes` record of one
    process when `repeat` > 1 and it measured the case), else merged into the case already there. Returns the
    case as stored."""
    index = next((i for i, case in enumerate(results.cases) if case.id == result.id), None)
    if index is None:
        if repeat > 1 and result.ok:
            write_record(result, ProcessRecord(repeat, (ProcessRun.of(result, 0),)))
        results.cases.append(result)
        return result
    merged = merge_process(results.cases[index], result)
    results.cases[index] = merged
    return merged


def merge_process(case: CaseResult, new: CaseResult) -> CaseResult:
    """`case` (one or more processes, with its `processes` record) with one more process's result merged in."""
    record = read_record(case, ProcessRecord) or ProcessRecord(1, (ProcessRun.of(case, 0),))
    run = ProcessRun.of(new, len(record.runs))
    record = replace(record, runs=(*record.runs, run))
    # Copies of what _pool and apply_process_stats change, so that `case` itself stays as it was.
    merged = replace(case, timing=replace(case.timing), memory=replace(case.memory), loading=replace(case.loading))
    merged.warnings, merged.notes, merged.extra = list(case.warnings), list(case.notes), dict(case.extra)
    if run.ok:
        _pool(merged, new)
    else:
        merged.warnings.append(
            CaseWarning(
                "process_failed",
                f"process {run.index + 1} of {record.repeat} ended {run.status}: {run.error}; the case's figures rest "
                f"on the {len(record.ok_runs)} process(es) that measured it",
                f"process {run.index + 1} {run.status}",
            )
        )
    write_record(merged, record)
    apply_process_stats(merged, record)
    return merged


def _pool(merged: CaseResult, new: CaseResult) -> None:
    """The new process's samples, rounds, time and memory added to the merged case."""
    from infermeter.measure.case_figures import stored_samples

    merged.timing.samples_ms = stored_samples([*merged.timing.samples_ms, *new.timing.samples_ms])
    merged.timing.rounds_p50_ms = [*merged.timing.rounds_p50_ms, *new.timing.rounds_p50_ms]
    merged.timing.iterations += new.timing.iterations
    merged.duration_s = (merged.duration_s or 0.0) + (new.duration_s or 0.0)
    if new.memory.peak_rss_mb is not None:
        merged.memory.peak_rss_mb = max(merged.memory.peak_rss_mb or 0.0, new.memory.peak_rss_mb)
    if merged.timing.interference is not None and new.timing.interference is not None:
        merged.timing.interference = merged.timing.interference + new.timing.interference
    codes = {warning.code for warning in merged.warnings}
    merged.warnings += [warning for warning in new.warnings if warning.code not in codes]
    merged.notes += [note for note in new.notes if note not in merged.notes]


def apply_process_stats(case: CaseResult, record: ProcessRecord) -> None:
    """The case's headline figures from its processes: statistics of the pooled samples, then the P50 and its 95%
    interval from the process medians (two or more), throughput their mean, load time their median."""
    from infermeter.figures.latency_stats import latency_stats, replicate_p50

    ok = record.ok_runs
    if len(ok) < 2 or not case.timing.samples_ms:
        return
    pooled = latency_stats(case.timing.samples_ms)
    p50, ci = replicate_p50(record.medians_ms)
    case.latency_ms = replace(pooled, p50=p50, p50_ci95=ci)
    throughputs = [run.throughput for run in ok if run.throughput is not None]
    if throughputs:
        case.timing.throughput = statistics.fmean(throughputs)
    loads = [run.load_s for run in ok if run.load_s is not None]
    if loads:
        case.loading.load_s = statistics.median(loads)


def attach_process_paired(cases: Sequence[CaseResult]) -> None:
    """Each interleaved case after the group's first measured one gets its paired speedup over that baseline from
    their processes: per pass, the baseline's process median over the case's (the two timed interleaved in that
    pass), two passes or more; a case short of that keeps the speedup of its rounds."""
    from infermeter.measure.interleave import paired_speedup

    measured = [
        (case, record)
        for case in cases
        if case.ok and case.timing.rounds_p50_ms and (record := read_record(case, ProcessRecord)) is not None
    ]
    if len(measured) < 2:
        return
    base, base_record = measured[0]
    base_by_pass = {run.index: run.p50_ms for run in base_record.ok_runs if run.p50_ms is not None}
    for case, record in measured[1:]:
        common = [
            (base_by_pass[run.index], run.p50_ms)
            for run in record.ok_runs
            if run.index in base_by_pass and run.p50_ms is not None
        ]
        if len(common) >= 2:
            case.timing.paired = paired_speedup([b for b, _ in common], [c for _, c in common], base.id)
