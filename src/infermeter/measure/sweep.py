"""A sweep: every case of a benchmark matrix, group by group (interleaved) or case by case, saved as it goes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TypeVar

from infermeter.build.case_build import BuildOutcome
from infermeter.machine.speed_probe import SpeedTrace
from infermeter.measure.buildstage import run_builds
from infermeter.measure.interleave import run_group
from infermeter.measure.plan import PlanItem, SweepCase, SweepItem
from infermeter.measure.repeat import attach_process_paired, item_for_pass, passes_of, store_result, wants_more
from infermeter.measure.scenarios import scenario_of
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

    With `--repeat N` (`measure.repeat`) the plan is passed over N times, each pass running every case once more in
    a fresh process (a group interleaved again), merged into the case already recorded; a case short of its
    processes (an interrupted run) gets the missing ones. Every (item, pass) emits one done or skipped event.

    With `build_first` (all but a cold start, which measures the build itself), the build stage makes every
    artifact the pending cases need before any of them runs (`measure.buildstage`)."""
    sweeper = _Sweeper(plan, results, path=path, emit=on_event or (lambda _event: None), trace=trace)
    pending = [item for item in plan if wants_more(item, sweeper.done)]

    def build_phase(item: PlanItem, case: SweepCase, name: str) -> None:
        sweeper.emit(SweepEvent("phase", sweeper.position[id(item)], sweeper.total, case, phase=name))

    # Only inference cases have artifacts to build (a generation backend loads its model itself).
    buildable = [item for item in pending if isinstance(item, PlanItem)]
    sweeper.builds = run_builds(buildable, isolate, build_phase) if build_first and buildable else {}
    for index in range(passes_of(plan)):
        for group in comparison_groups(plan):
            sweeper.run_group(group, index, isolate)
    return results


@dataclass
class _Sweeper:
    """A sweep in progress: the plan's positions, the cases recorded by id, what to tell and where to save."""

    plan: Sequence[SweepItem]
    results: ResultsFile
    _: KW_ONLY  # the rest by keyword
    path: Path | None
    emit: Callable[[SweepEvent], None]
    trace: SpeedTrace | None
    builds: Mapping[str, BuildOutcome] = field(default_factory=dict)
    position: dict[int, int] = field(init=False)
    done: dict[str, CaseResult] = field(init=False)

    def __post_init__(self) -> None:
        self.position = {id(item): index for index, item in enumerate(self.plan)}
        self.done = {case.id: case for case in self.results.cases}

    @property
    def total(self) -> int:
        return len(self.plan)

    def save(self) -> None:
        if self.path is not None:
            write_results(self.path, self.results)

    def record(
        self, item: SweepItem, result: CaseResult, skipped: dict[str, str], note: str | None = None
    ) -> CaseResult:
        """Store one process's result (merged into its case under --repeat), save, tell; the case as stored."""
        _fallback_record(item, result, skipped)
        item.recorded(result)
        if note:
            result.notes.append(note)
        stored = store_result(self.results, result, item.case.settings.repeat)
        self.done[stored.id] = stored
        self.save()
        self.emit(SweepEvent("done", self.position[id(item)], self.total, item.case, result=stored))
        return stored

    def run_group(self, group: list[SweepItem], index: int, isolate: bool) -> None:
        """Pass `index` over one comparison group: interleaved when it can be, else case by case."""
        todo: list[SweepItem] = []
        for item in group:
            wanted = item_for_pass(item, self.done, index)
            if wanted is None:
                self.emit(SweepEvent("skipped", self.position[id(item)], self.total, item.case))
            else:
                self.position[id(wanted)] = self.position[id(item)]
                todo.append(wanted)
        note = None
        settings = todo[0].case.settings if todo else None
        # A scenario whose cases are not interleaved (a soak: its memory over time is its own) runs them one by one.
        interleaved = settings is not None and settings.interleave and scenario_of(settings).interleaved
        if isolate and len(todo) > 1 and interleaved:

            def group_phase(i: int, case: SweepCase, name: str, items: list[SweepItem] = todo) -> None:
                self.emit(SweepEvent("phase", self.position[id(items[i])], self.total, case, phase=name))

            finished, note = run_group(todo, group_phase, self.trace, self.builds)
            stored = [self.record(item, result, skipped) for item, result, skipped in finished]
            if note is None:
                if index > 0:
                    attach_process_paired(stored)
                    self.save()
                return
        for item in todo:
            self.emit(SweepEvent("start", self.position[id(item)], self.total, item.case))

            def on_phase(case: SweepCase, name: str, i: int = self.position[id(item)]) -> None:
                self.emit(SweepEvent("phase", i, self.total, case, phase=name))

            result, skipped = _run_sequential(item, isolate, on_phase, self.builds)
            self.record(item, result, skipped, note)
