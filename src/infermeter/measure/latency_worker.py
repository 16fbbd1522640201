"""The latency scenario's worker: an inference case loaded in a fresh process, then timed in bursts until its stop
rule (`measure.burstworker`), under its allocator and memory limit. The soak's is `measure.soak_run`."""

from __future__ import annotations

import multiprocessing.connection
from typing import Any

from infermeter.core.case import Case
from infermeter.measure.allocator import allocator_environment
from infermeter.measure.burstworker import BurstWorker, serve_bursts
from infermeter.measure.execute import CaseRunner, PhaseCallback, blank_result, peak_rss_mb
from infermeter.measure.isolation import WorkerSetup, WorkerStarted
from infermeter.measure.memlimit import MemoryLimit, case_limit
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult, case_to_dict


def _latency_job(
    conn: multiprocessing.connection.Connection,
    started: WorkerStarted,
    spec: ModelSpec,
    case: Case,
    artifact: dict[str, Any] | None,
    limit: MemoryLimit | None,
) -> None:
    """The worker's job (under `isolation.worker_main`): load the case (from its built `artifact`), say `ready`,
    then serve `burst` requests until `finish` (see CaseWorker)."""
    import psutil

    # Interpreter start-up and infermeter's own imports: part of any cold start (10 ms clock resolution).
    process_start_s = max(0.0, started.entered_s - psutil.Process().create_time())
    built = Artifact.from_dict(artifact) if artifact is not None else None
    runner = CaseRunner(spec, case, on_phase=lambda name: conn.send(("phase", name)), artifact=built)
    runner.result.loading.process_start_s = process_start_s
    if started.limit_note:
        runner.result.notes.append(started.limit_note)
    if not runner.load():
        if limit is not None and runner.result.memory.peak_rss_mb is None:
            # The peak it reached before failing (under a limit, likely the allocation that hit it), which the
            # parent's polling may not have seen in a worker that fails within its first 0.2 s.
            runner.result.memory.peak_rss_mb = peak_rss_mb()
        conn.send(("result", case_to_dict(runner.result)))
        return

    def on_started(result: CaseResult) -> None:
        result.loading.process_start_s = process_start_s

    serve_bursts(conn, runner, on_started)


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
            _latency_job,
            (spec, case, payload, limit),
            case.settings.case_timeout_s,
            blank,
            on_phase,
            allocator_environment(case.allocator),
            WorkerSetup(case.threads, limit),
        )
