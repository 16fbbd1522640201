"""A soak case in a worker process of its own (`measure.soak_case` there), under its allocator and memory limit:
a crash, a timeout or a kill for memory is the case's recorded result (`crashed`, `timeout`, `oom`), and the sweep
goes on."""

from __future__ import annotations

import multiprocessing.connection
import time
from typing import Any

from infermeter.core.case import Case
from infermeter.measure.allocator import allocator_environment
from infermeter.measure.execute import PhaseCallback, blank_result
from infermeter.measure.isolation import WorkerFailure, WorkerGone, WorkerProcess, WorkerSetup, WorkerStarted
from infermeter.measure.memlimit import case_limit, mark_oom
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult, case_from_dict, case_to_dict


def _soak_job(
    conn: multiprocessing.connection.Connection,
    started: WorkerStarted,
    spec: ModelSpec,
    case: Case,
    artifact: dict[str, Any] | None,
) -> None:
    """The soak worker's job (under `isolation.worker_main`, inside the case's memory limit): soak the case, send
    its result."""
    from infermeter.measure.soak_case import soak_case

    built = Artifact.from_dict(artifact) if artifact is not None else None
    result = soak_case(spec, case, built, on_phase=lambda name: conn.send(("phase", name)))
    if started.limit_note:
        result.notes.append(started.limit_note)
    conn.send(("result", case_to_dict(result)))


def run_soak(
    spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None, artifact: Artifact | None = None
) -> CaseResult:
    """Soak `case` in a fresh worker with its allocator's environment and its memory limit; never raises for the
    case's own failures. --case-timeout bounds the worker's silences, not its life: the soak reports its progress
    at every memory sample, so 5,000 slow requests are not killed while they advance, and a hung engine still is."""
    limit = case_limit(case)
    payload = artifact.to_dict() if artifact is not None else None
    worker = WorkerProcess(
        _soak_job,
        (spec, case, payload),
        case.settings.case_timeout_s,
        on_phase,
        allocator_environment(case.allocator),
        idle_timeout=True,
        setup=WorkerSetup(case.threads, limit),
    )
    try:
        kind, message = worker.receive()
        worker.join()
        if kind == "result":
            result = case_from_dict(message)
        else:
            failure: WorkerFailure = message
            result = blank_result(spec, case, failure.status, failure.message)
    except WorkerGone as gone:
        result = blank_result(spec, case, gone.status, gone.error)
    except BaseException:
        worker.kill()
        raise
    result.duration_s = time.perf_counter() - worker.started
    if limit is not None:
        mark_oom(result, limit, worker.peak_seen_mb)
    return result
