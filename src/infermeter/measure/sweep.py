"""A sweep: every case of a benchmark matrix, one after another, saved after each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from infermeter.case import Case
from infermeter.measure.plan import PlanItem
from infermeter.measure.worker import run_in_process, run_isolated
from infermeter.results.io import write_results
from infermeter.results.schema import CaseResult, ResultsFile


@dataclass(frozen=True)
class SweepEvent:
    """Progress of a sweep for a live display: `kind` is start, phase, done or skipped."""

    kind: str
    index: int
    total: int
    case: Case
    phase: str = ""
    result: CaseResult | None = None


def run_sweep(
    plan: Sequence[PlanItem],
    results: ResultsFile,
    path: Path | None,
    isolate: bool = True,
    on_event: Callable[[SweepEvent], None] | None = None,
) -> ResultsFile:
    """Run every item of `plan` not already in `results`, appending each result and rewriting `path` atomically
    after every case, so that an interruption loses only the case in flight.

    A fallback chain runs its cases in order until one is `ok`; the result kept is that one (or the last tried),
    with `extra["fallback"]` saying which backend ran and why each earlier one did not."""
    emit = on_event or (lambda _event: None)
    done_ids = {c.id for c in results.cases}
    runner = run_isolated if isolate else run_in_process
    total = len(plan)
    for index, item in enumerate(plan):
        if any(case.id in done_ids for case in item.chain):
            emit(SweepEvent("skipped", index, total, item.case))
            continue
        skipped: dict[str, str] = {}
        result: CaseResult | None = None
        for case in item.chain:
            emit(SweepEvent("start", index, total, case))

            def on_phase(name: str, i: int = index, c: Case = case) -> None:
                emit(SweepEvent("phase", i, total, c, phase=name))

            result = runner(item.spec, case, on_phase)
            if result.ok or case is item.chain[-1]:
                break
            skipped[case.backend] = f"{result.status}: {result.error}"
        assert result is not None
        if len(item.chain) > 1:
            result.extra["fallback"] = {
                "chain": [c.backend for c in item.chain],
                "ran": result.backend,
                "skipped": skipped,
            }
        results.cases.append(result)
        done_ids.add(result.id)
        if path is not None:
            write_results(path, results)
        emit(SweepEvent("done", index, total, item.case, result=result))
    return results
