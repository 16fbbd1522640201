"""A whole `bench` run, from its results file to the finished cases: the one code path behind the CLI's `bench`
and the Python API's `infermeter.bench`, so both measure with the same isolation, interleaving, stop rules and
machine-speed probe, and write the same results file.

A new file gets the plan before its first case; a resumed one (`bench --resume FILE`) replays the plan stored in
it. What a person sees while it runs (notes, spinners, a progress bar) goes through a `BenchDisplay`, which the
caller chooses: the terminal's for the CLI and for notebooks, `SilentDisplay` for scripts that want none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from infermeter.core.errors import InfermeterError, ResultsError, UsageError
from infermeter.core.interrupts import deferred_interrupts, terminate_as_interrupt
from infermeter.machine.environment import new_results_file
from infermeter.machine.speed_probe import SpeedTrace
from infermeter.measure.plan import Matrix, PlanItem
from infermeter.measure.planfile import StoredPlan, record_resumption, remaining, store_plan, stored_plan
from infermeter.measure.scenarios import Scenario
from infermeter.models.spec import ModelSpec
from infermeter.results.schema import CaseResult, ResultsFile

if TYPE_CHECKING:
    from infermeter.measure.sweep import SweepEvent


class BenchDisplay(Protocol):
    """What a bench run tells a person while it runs. Texts are plain (no markup)."""

    def note(self, text: str) -> None:
        """A passing remark (a default backend left out, a one-time measurement starting)."""

    def warn(self, text: str) -> None:
        """Something went wrong that does not stop the run (the history database could not be written)."""

    def status(self, text: str) -> AbstractContextManager[object]:
        """A spinner with `text` for the duration of the block."""

    def progress(self, total: int) -> AbstractContextManager[Callable[[SweepEvent], None]]:
        """A progress display for the sweep of `total` plan items; the block receives the event callback."""

    def interrupted(self, exc: KeyboardInterrupt, finished: int, path: Path | None) -> None:
        """The sweep was interrupted (Ctrl-C, or SIGTERM as `Terminated`) with `finished` cases saved in `path`.
        The run re-raises `exc` afterwards unless this raises something else (the CLI exits 130 or 143)."""


class SilentDisplay:
    """A BenchDisplay that shows nothing."""

    def note(self, text: str) -> None:
        """Dropped."""

    def warn(self, text: str) -> None:
        """Dropped."""

    def status(self, text: str) -> AbstractContextManager[object]:
        """No spinner."""
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def progress(self, total: int) -> Iterator[Callable[[SweepEvent], None]]:
        """No progress display: the events are dropped."""
        yield lambda _event: None

    def interrupted(self, exc: KeyboardInterrupt, finished: int, path: Path | None) -> None:
        """Nothing to say: the interrupt goes on to the caller."""


@dataclass
class Sweep:
    """The results file a bench run writes (`path`, None to keep it in memory), its content so far, the whole plan
    and what is left of it."""

    results: ResultsFile
    path: Path | None
    plan: StoredPlan
    items: list[PlanItem]
    todo: list[PlanItem]


def new_sweep(
    path: Path | None,
    matrix: Matrix,
    scenario: Scenario,
    isolate: bool,
    command: Sequence[str],
    environment: dict[str, Any],
) -> Sweep:
    """A fresh results file for `matrix` run as `scenario` (`measure.scenarios`: LATENCY, or COLD_START), its plan
    stored in it."""
    plan = StoredPlan((matrix,), tuple(command), scenario, isolate)
    items = plan.items()  # a bad shape fails here, before anything is written
    results = new_results_file(command, environment)
    store_plan(results, plan)
    return Sweep(results, path, plan, items, items)


def resumed_sweep(
    resume: Path,
    output: Path | None,
    matrix: Matrix | None,
    scenario: Scenario,
    isolate: bool,
    command: Sequence[str],
    resolve: Callable[[str], ModelSpec],
) -> Sweep:
    """The sweep of a results file to resume: its stored plan (extended by `matrix` with --resume-extend), the
    original command kept and this resumption appended to `resumed`. ResultsError before any write when the file
    or its plan cannot be read."""
    from infermeter.results.io import read_results

    results = read_results(resume)
    stored = stored_plan(results, resume, resolve)
    if matrix is None:
        if stored is None:
            raise ResultsError(
                f"{resume} holds no plan (written by an older infermeter), so there is nothing to replay: give the "
                f"original command's flags with --resume {resume} --resume-extend"
            )
        plan = stored
    elif stored is None:
        plan = StoredPlan((matrix,), tuple(results.command or command), scenario, isolate)
    elif (stored.scenario, stored.isolate) != (scenario, isolate):
        raise UsageError(f"--resume-extend keeps {resume}'s --cold-start and --no-isolation as they were")
    else:
        plan = stored.extended(matrix)
    items = plan.items()
    todo = remaining(items, results)
    if not results.command:
        results.command = list(plan.command)
    store_plan(results, plan)
    record_resumption(results, command, len(todo), extended=matrix is not None)
    return Sweep(results, output or resume, plan, items, todo)


@dataclass(frozen=True)
class BenchRun:
    """A finished bench run: its results (also in `path` when there is one), the plan and the speed probe's
    readings (`trace.moved`: how far the machine's speed moved during the run), and the plan's scenario (which
    table shows its cases)."""

    results: ResultsFile
    path: Path | None
    items: list[PlanItem]
    trace: SpeedTrace
    scenario: Scenario

    @property
    def cases(self) -> list[CaseResult]:
        """The results of this run's plan, in the order they ran (a resumed file may hold others too)."""
        planned = {case.id for item in self.items for case in item.chain}
        return [case for case in self.results.cases if case.id in planned]


def _save(path: Path | None, results: ResultsFile) -> None:
    if path is not None:
        from infermeter.results.io import write_results

        write_results(path, results)


def prepare_onnx(plan: Sequence[PlanItem], display: BenchDisplay) -> None:
    """Export each model's ONNX form once, before any case, when an ONNX-reading backend will need it: the export
    is a one-time conversion (cached on disk), not part of any one backend's load time or peak memory."""
    from infermeter.backends.registry import get_backend
    from infermeter.models.convert import onnx_for

    seen: set[str] = set()
    for item in plan:
        spec = item.spec
        if spec.ref in seen or not spec.has_torch_form:
            continue
        if any(get_backend(c.backend).consumes_onnx and get_backend(c.backend).available() is None for c in item.chain):
            seen.add(spec.ref)
            status = display.status(f"exporting {spec.ref} to ONNX (once; cached for later runs)")
            # An export error is not raised here: each case that needs the export reports it as its own failure.
            with status, contextlib.suppress(InfermeterError), deferred_interrupts():
                onnx_for(spec)


def _annotate_roofline(results: ResultsFile, path: Path | None, display: BenchDisplay) -> None:
    """Achieved GFLOP/s against this machine's measured ceilings (`infermeter peak`, cached per machine)."""
    from infermeter.graph.roofline import annotate_roofline
    from infermeter.machine.ceilings_cache import cached_peak

    if cached_peak() is None and any(case.ok and not case.synthetic for case in results.cases):
        display.note("measuring this machine's compute and memory ceilings once (infermeter peak)...")
    with display.status("roofline: counting FLOPs per model"), deferred_interrupts():
        annotate_roofline(results)
    _save(path, results)


class ClusterRunner(Protocol):
    """Runs the pending part `todo` of a plan's `items` on a cluster (`cluster.driver.run_on_cluster`), appending
    each case to `results` and rewriting `path` as each returns. Handed in by the caller: the cluster sits above
    measure, whose sweep each node runs."""

    def __call__(
        self,
        items: Sequence[PlanItem],
        todo: Sequence[PlanItem],
        results: ResultsFile,
        path: Path | None,
        isolate: bool,
        scenario: Scenario,
        on_event: Callable[[SweepEvent], None],
        warn: Callable[[str], None],
    ) -> None: ...


def _run_plan(sweep: Sweep, display: BenchDisplay, cluster: ClusterRunner | None) -> SpeedTrace:
    """The sweep under the display's progress, with the machine-speed probe read before, between rounds and after
    (kept in the results as `machine_speed`); with `cluster`, on the connected Ray cluster, where this machine's
    speed says nothing about the nodes' and is not probed. An interrupt reaches the display, then the caller."""
    from infermeter.measure.repeat import passes_of
    from infermeter.measure.sweep import run_sweep

    results, path, plan = sweep.results, sweep.path, sweep.plan
    on_cluster = cluster is not None
    trace = SpeedTrace()
    if not on_cluster:
        trace.read()
    try:
        # Every plan item is done or skipped once per pass (--repeat N: N passes over the plan).
        with terminate_as_interrupt(), display.progress(len(sweep.items) * passes_of(sweep.items)) as on_event:
            if cluster is not None:
                cluster(sweep.items, sweep.todo, results, path, plan.isolate, plan.scenario, on_event, display.warn)
            else:
                build_first = plan.scenario.prepare_first
                run_sweep(sweep.items, results, path, plan.isolate, on_event, trace, build_first=build_first)
        if not on_cluster:
            trace.read()
            results.extra["machine_speed"] = trace.to_dict()
        _save(path, results)
    except KeyboardInterrupt as exc:
        display.interrupted(exc, len(results.cases), path)
        raise
    return trace


def check_repeat(sweep: Sweep, on_cluster: bool) -> None:
    """UsageError when the plan repeats its cases (`--repeat`) in a run that cannot: a scenario that says why not
    (a cold start: its passes are already fresh processes), without isolation (no fresh process to repeat in) or on
    a cluster (whose units run each case once)."""
    # From the matrices, not the items: a cold start's items carry settings of their own.
    if max(matrix.settings.repeat for matrix in sweep.plan.parts) <= 1:
        return
    scenario = sweep.plan.scenario
    if scenario.no_repeat:
        raise UsageError(f"--repeat with {scenario.flag}: {scenario.no_repeat}; drop --repeat")
    if not sweep.plan.isolate:
        raise UsageError("--repeat runs each case in fresh processes; drop --no-isolation")
    if on_cluster:
        raise UsageError("--repeat is not supported with --cluster yet; run the repeats locally or drop --repeat")


def run_bench(
    sweep: Sweep,
    display: BenchDisplay,
    roofline: bool = True,
    history: bool = True,
    cluster: ClusterRunner | None = None,
) -> BenchRun:
    """Run what is left of `sweep`'s plan, saving the results file after every case: the ONNX exports first
    (unless its scenario times them, a cold start), then the sweep, then (unless its scenario has no use for them,
    or `roofline` is off) the roofline figures, and the run recorded in the
    history database when `history` is on. `cluster` (`cluster.driver.run_on_cluster`): the sweep runs on the
    connected Ray cluster (`bench --cluster`), each node making its own exports; no roofline there (each node would
    need its own ceilings)."""
    results, path = sweep.results, sweep.path
    on_cluster = cluster is not None
    scenario = sweep.plan.scenario
    check_repeat(sweep, on_cluster)
    _save(path, results)
    if scenario.prepare_first and not on_cluster:
        prepare_onnx(sweep.todo, display)
    trace = _run_plan(sweep, display, cluster)
    if roofline and on_cluster:
        display.note("no roofline figures for a --cluster run: each node would need its own measured ceilings")
    elif roofline and scenario.roofline:
        _annotate_roofline(results, path, display)
    if history:
        from infermeter.history.store import record_run

        problem = record_run(results, path)
        if problem:
            display.warn(problem)
    return BenchRun(results, path, sweep.items, trace, scenario)
