"""Running one case: in-process (`execute_case`) or in a fresh worker process (`run_isolated`).

Isolation gives each case its own peak memory, cold start and crash: a segfault, abort or hang in a
framework becomes a `crashed` or `timeout` result, and the sweep goes on.
"""

from __future__ import annotations

import multiprocessing.connection

from infermeter.build.case_build import BuildFailure
from infermeter.core.case import Case
from infermeter.measure.allocator import allocator_unavailable
from infermeter.measure.burstworker import WorkerEnded
from infermeter.measure.execute import (
    PhaseCallback,
    blank_result,
    execute_case,
    unavailable_reason,
)
from infermeter.measure.isolation import (
    WorkerFailure,
    WorkerGone,
    WorkerProcess,
    WorkerSetup,
    WorkerStarted,
    set_thread_environment,
)
from infermeter.measure.scenarios import scenario_of
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult, CaseWarning

__all__ = [
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


def _build_job(
    conn: multiprocessing.connection.Connection, _started: WorkerStarted, spec: ModelSpec, case: Case
) -> None:
    """The build worker's job: build `case`'s artifact (`case_build.build_artifact`) and send it back."""
    from infermeter.build.case_build import build_artifact

    conn.send(("phase", "building"))
    artifact = build_artifact(spec, case)
    conn.send(("built", artifact.to_dict() if artifact is not None else None))


def build_isolated(spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None) -> Artifact | BuildFailure:
    """`case`'s artifact built in a fresh worker within `build_timeout_s` (`case_build.build_artifact`);
    a failure, crash or timeout comes back as a `BuildFailure`, never raised."""
    worker = WorkerProcess(
        _build_job, (spec, case), case.settings.build_timeout_s, on_phase, setup=WorkerSetup(case.threads)
    )
    try:
        kind, payload = worker.receive()
    except WorkerGone as gone:
        error = gone.error.replace(f"within {worker.timeout_s:g} s", f"within --build-timeout {worker.timeout_s:g} s")
        return BuildFailure(gone.status, error)
    worker.join()
    if kind == "error":
        failure: WorkerFailure = payload
        return BuildFailure(failure.status, failure.message)
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
    return scenario_of(case.settings).run_isolated(spec, case, on_phase, built_artifact(built))


def run_in_process(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None, built: Artifact | BuildFailure | None = None
) -> CaseResult:
    """`--no-isolation`: run in this process (for debugging); peak memory is then the whole process's."""
    ended = unrunnable_result(spec, case, built)
    if ended is not None:
        return ended
    set_thread_environment(case.threads)
    result = scenario_of(case.settings).run_in_process(spec, case, on_phase, built_artifact(built))
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
