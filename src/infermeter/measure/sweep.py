"""A sweep: every case of a benchmark matrix, one after another, saved after each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from infermeter.case import Case
from infermeter.measure.worker import run_in_process, run_isolated
from infermeter.models.spec import ModelSpec
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
    plan: Sequence[tuple[ModelSpec, Case]],
    results: ResultsFile,
    path: Path | None,
    isolate: bool = True,
    on_event: Callable[[SweepEvent], None] | None = None,
) -> ResultsFile:
    """Run every (model, case) of `plan` not already in `results`, appending each result and rewriting `path`
    atomically after every case, so an interruption loses only the case in flight."""
    emit = on_event or (lambda _event: None)
    done_ids = {c.id for c in results.cases}
    runner = run_isolated if isolate else run_in_process
    total = len(plan)
    for index, (spec, case) in enumerate(plan):
        if case.id in done_ids:
            emit(SweepEvent("skipped", index, total, case))
            continue
        emit(SweepEvent("start", index, total, case))

        def on_phase(name: str, i: int = index, c: Case = case) -> None:
            emit(SweepEvent("phase", i, total, c, phase=name))

        result = runner(spec, case, on_phase)
        results.cases.append(result)
        done_ids.add(case.id)
        if path is not None:
            write_results(path, results)
        emit(SweepEvent("done", index, total, case, result=result))
    return results
