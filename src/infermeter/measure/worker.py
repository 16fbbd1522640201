"""Running one case: in-process (`execute_case`) or in a fresh worker process (`run_isolated`).

Isolation gives each case its own peak memory, cold start and crash: a segfault, abort or hang in a
framework becomes a `crashed` or `timeout` result, and the sweep goes on.
"""

from __future__ import annotations

import multiprocessing.connection
import signal
import time
from typing import Any

from infermeter.case import Case
from infermeter.case_build import BuildFailure
from infermeter.measure.allocator import allocator_environment, allocator_unavailable
from infermeter.measure.burstworker import BurstWorker, WorkerEnded, run_worker_until_stopped, serve_bursts
from infermeter.measure.execute import (
    CaseRunner,
    PhaseCallback,
    blank_result,
    execute_case,
    unavailable_reason,
)
from infermeter.measure.isolation import WorkerGone, WorkerProcess, die_with_parent, set_thread_environment
from infermeter.measure.memlimit import MemoryLimit, enter_limit, make_limit
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult, CaseWarning, case_to_dict

__all__ = [
    "CaseWorker",
    "PhaseCallback",
    "WorkerEnded",
    "WorkerGone",
    "WorkerProcess",
    "blank_result",
    "build_isolated",
    "execute_case",
    "run_in_process",
    "run_isolated",
    "unavailable_reason",
]


def _child_main(
    conn: multiprocessing.connection.Connection,
    spec: ModelSpec,
    case: Case,
    artifact: dict[str, Any] | None,
    limit: MemoryLimit | None = None,
) -> None:
    """The worker: load the case (from its built `artifact`), say `ready`, then serve `burst` requests until
    `finish` (see CaseWorker). `limit`: the case's memory limit, entered before anything is loaded."""
    entered = time.time()
    die_with_parent()
    # The parent owns Ctrl-C: it stops this worker itself, after saving what was measured.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_note = enter_limit(limit) if limit is not None else None
    set_thread_environment(case.threads)
    try:
        import psutil

        # Interpreter start-up and infermeter's own imports: part of any cold start (10 ms clock resolution).
        process_start_s = max(0.0, entered - psutil.Process().create_time())
        built = Artifact.from_dict(artifact) if artifact is not None else None
        runner = CaseRunner(spec, case, on_phase=lambda name: conn.send(("phase", name)), artifact=built)
        runner.result.process_start_s = process_start_s
        if limit_note:
            runner.result.notes.append(limit_note)
        if not runner.load():
            conn.send(("result", case_to_dict(runner.result)))
            return

        def started(result: CaseResult) -> None:
            result.process_start_s = process_start_s

        serve_bursts(conn, runner, started)
    except BaseException as exc:  # anything at all: report it rather than die silently
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _build_main(conn: multiprocessing.connection.Connection, spec: ModelSpec, case: Case) -> None:
    """The build worker: build `case`'s artifact (`case_build.build_artifact`) and send it back."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_thread_environment(case.threads)
    try:
        from infermeter.case_build import build_artifact

        conn.send(("phase", "building"))
        artifact = build_artifact(spec, case)
        conn.send(("built", artifact.to_dict() if artifact is not None else None))
    except BaseException as exc:
        from infermeter.errors import describe_exception, failure_status

        conn.send(("error", (failure_status(exc), describe_exception(exc))))
    finally:
        conn.close()


def case_limit(case: Case) -> MemoryLimit | None:
    """The memory limit `case`'s worker runs under (`--memory-limit`), None without one."""
    limit_mb = case.settings.memory_limit_mb
    return make_limit(limit_mb, case.id) if limit_mb > 0 else None


class CaseWorker(BurstWorker):
    """One inference case in a fresh worker, driven from here (`measure.burstworker.BurstWorker`): sequential sweeps
    and interleaved rounds use it; `artifact` is the case's built artifact (`case_build`), when it has one."""

    def __init__(
        self, spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None, artifact: Artifact | None = None
    ) -> None:
        self.spec, self.case = spec, case
        payload = artifact.to_dict() if artifact is not None else None
        limit = case_limit(case)

        def blank(status: str, error: str) -> CaseResult:
            return blank_result(spec, case, status, error)

        super().__init__(
            _child_main,
            (spec, case, payload, limit),
            case.settings.case_timeout_s,
            blank,
            on_phase,
            allocator_environment(case.allocator),
            limit,
        )


def build_isolated(spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None) -> Artifact | BuildFailure:
    """`case`'s artifact built in a fresh worker within `build_timeout_s` (`case_build.build_artifact`);
    a failure, crash or timeout comes back as a `BuildFailure`, never raised."""
    worker = WorkerProcess(_build_main, (spec, case), case.settings.build_timeout_s, on_phase)
    try:
        kind, payload = worker.receive()
    except WorkerGone as gone:
        error = gone.error.replace(f"within {worker.timeout_s:g} s", f"within --build-timeout {worker.timeout_s:g} s")
        return BuildFailure(gone.status, error)
    worker.join()
    if kind == "error":
        status, error = payload if isinstance(payload, tuple | list) else ("failed", payload)
        return BuildFailure(status, error)
    return Artifact.from_dict(payload)


def unrunnable_result(spec: ModelSpec, case: Case, built: Artifact | BuildFailure | None) -> CaseResult | None:
    """The result of a case that cannot start (unavailable here, or its artifact's build failed), else None."""
    reason = unavailable_reason(spec, case) or allocator_unavailable(case.allocator)
    if reason:
        return blank_result(spec, case, "unavailable", reason)
    if isinstance(built, BuildFailure):
        return blank_result(spec, case, built.status, f"build: {built.error}")
    return None


def built_artifact(built: Artifact | BuildFailure | None) -> Artifact | None:
    """The artifact of a build outcome (None for a failure or no build)."""
    return built if isinstance(built, Artifact) else None


def run_isolated(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None, built: Artifact | BuildFailure | None = None
) -> CaseResult:
    """Run `case` alone in a fresh worker until its stop rule, within `case_timeout_s`, from its artifact when the
    build stage made one (`built`); never raises for the case's own failures (they become `failed`, `crashed`,
    `timeout` or `unavailable` results, a failed build included)."""
    unrunnable = unrunnable_result(spec, case, built)
    if unrunnable is not None:
        return unrunnable
    if case.settings.soaking:
        from infermeter.measure.soak_run import run_soak

        return run_soak(spec, case, on_phase, built_artifact(built))
    return run_worker_until_stopped(CaseWorker(spec, case, on_phase, built_artifact(built)), case.settings)


def run_in_process(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None, built: Artifact | BuildFailure | None = None
) -> CaseResult:
    """`--no-isolation`: run in this process (for debugging); peak memory is then the whole process's."""
    ended = unrunnable_result(spec, case, built)
    if ended is not None:
        return ended
    set_thread_environment(case.threads)
    if case.settings.soaking:
        from infermeter.measure.soak_case import soak_case

        result = soak_case(spec, case, built_artifact(built), on_phase)
    else:
        result = execute_case(spec, case, on_phase, built_artifact(built))
    result.isolated = False
    if result.ok:
        result.warnings.append(
            CaseWarning(
                "not_isolated",
                "ran with --no-isolation: peak memory and first-inference time include earlier cases in this "
                "process; rerun without --no-isolation for per-case figures",
            )
        )
    return result
