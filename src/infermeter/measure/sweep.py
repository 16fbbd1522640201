"""A sweep: every case of a benchmark matrix, group by group (interleaved) or case by case, saved as it goes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from infermeter.measure.build import BuildOutcome
from infermeter.measure.buildstage import run_builds
from infermeter.measure.interleave import run_group
from infermeter.measure.plan import PlanItem, SweepCase, SweepItem
from infermeter.measure.speedprobe import SpeedTrace
from infermeter.results.io import write_results
from infermeter.results.schema import CaseResult, ResultsFile

ItemT = TypeVar("ItemT", bound=SweepItem)


@dataclass(frozen=True)
class SweepEvent:
    """Progress of a sweep for a live display: `kind` is start, phase, done or skipped."""

    kind: str
    index: int
    total: int
    case: SweepCase
    phase: str = ""
    result: CaseResult | None = None


def comparison_groups(plan: Sequence[ItemT]) -> list[list[ItemT]]:
    """Consecutive plan items of one comparison group (the plan orders backends innermost)."""
    groups: list[list[ItemT]] = []
    for item in plan:
        if groups and groups[-1][0].case.group_key == item.case.group_key:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def _fallback_record(item: SweepItem, result: CaseResult, skipped: dict[str, str]) -> None:
    if len(item.chain) > 1:
        result.extra["fallback"] = {"chain": [c.backend for c in item.chain], "ran": result.backend, "skipped": skipped}


def _run_sequential(
    item: SweepItem,
    isolate: bool,
    on_phase: Callable[[SweepCase, str], None],
    builds: Mapping[str, BuildOutcome],
) -> tuple[CaseResult, dict[str, str]]:
    """A fallback chain runs its cases in order until one is `ok`: (that result or the last tried, skipped)."""
    skipped: dict[str, str] = {}
    result: CaseResult | None = None
    for index, case in enumerate(item.chain):
        phase = lambda name, c=case: on_phase(c, name)  # noqa: E731
        result = item.run_alone(index, phase, builds.get(case.id), isolate)
        if result.ok or index == len(item.chain) - 1:
            break
        skipped[case.backend] = f"{result.status}: {result.error}"
    assert result is not None
    return result, skipped


def run_sweep(
    plan: Sequence[SweepItem],
    results: ResultsFile,
    path: Path | None,
    isolate: bool = True,
    on_event: Callable[[SweepEvent], None] | None = None,
    trace: SpeedTrace | None = None,
    build_first: bool = True,
) -> ResultsFile:
    """Run every item of `plan` not already in `results`, appending each result and rewriting `path` atomically
    after every case (every group, when interleaved), so that an interruption loses only what is in flight.

    A comparison group of two or more cases runs in interleaved rounds (`measure.interleave`) unless its
    settings say `interleave=False` or isolation is off; otherwise each case runs alone until its stop rule.
    A fallback chain keeps the first of its cases that runs, with `extra["fallback"]` saying which backend ran and
    why each earlier one did not. `trace` takes machine-speed probe readings between rounds.

    With `build_first` (all but a cold start, which measures the build itself), the build stage makes every
    artifact the pending cases need before any of them runs (`measure.buildstage`)."""
    emit = on_event or (lambda _event: None)
    done_ids = {c.id for c in results.cases}
    total = len(plan)
    position = {id(item): index for index, item in enumerate(plan)}

    def record(item: SweepItem, result: CaseResult, skipped: dict[str, str], note: str | None = None) -> None:
        _fallback_record(item, result, skipped)
        item.recorded(result)
        if note:
            result.notes.append(note)
        results.cases.append(result)
        done_ids.add(result.id)
        if path is not None:
            write_results(path, results)
        emit(SweepEvent("done", position[id(item)], total, item.case, result=result))

    pending = [item for item in plan if not any(case.id in done_ids for case in item.chain)]

    def build_phase(item: PlanItem, case: SweepCase, name: str) -> None:
        emit(SweepEvent("phase", position[id(item)], total, case, phase=name))

    # Only inference cases have artifacts to build (a generation backend loads its model itself).
    buildable = [item for item in pending if isinstance(item, PlanItem)]
    builds = run_builds(buildable, isolate, build_phase) if build_first and buildable else {}
    for group in comparison_groups(plan):
        todo: list[SweepItem] = []
        for item in group:
            if any(case.id in done_ids for case in item.chain):
                emit(SweepEvent("skipped", position[id(item)], total, item.case))
            else:
                todo.append(item)
        note = None
        settings = todo[0].case.settings if todo else None
        # A soak is one long run per case, never interleaved: its memory over time is its own.
        if isolate and len(todo) > 1 and settings is not None and settings.interleave and not settings.soaking:

            def group_phase(index: int, case: SweepCase, name: str, items: list[SweepItem] = todo) -> None:
                emit(SweepEvent("phase", position[id(items[index])], total, case, phase=name))

            finished, note = run_group(todo, group_phase, trace, builds)
            for item, result, skipped in finished:
                record(item, result, skipped)
            if note is None:
                continue
        for item in todo:
            emit(SweepEvent("start", position[id(item)], total, item.case))

            def on_phase(case: SweepCase, name: str, i: int = position[id(item)]) -> None:
                emit(SweepEvent("phase", i, total, case, phase=name))

            result, skipped = _run_sequential(item, isolate, on_phase, builds)
            record(item, result, skipped, note)
    return results
