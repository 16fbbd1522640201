"""The latency scenario's worker: an inference case loaded in a fresh process, then timed in bursts until its stop
rule (`measure.burstworker`), under its allocator and memory limit. The soak's is `measure.soak_run`."""

from __future__ import annotations

import multiprocessing.connection
import signal
import time
from typing import Any

from infermeter.core.case import Case
from infermeter.measure.allocator import allocator_environment
from infermeter.measure.burstworker import BurstWorker, serve_bursts
from infermeter.measure.execute import CaseRunner, PhaseCallback, blank_result, peak_rss_mb
from infermeter.measure.isolation import die_with_parent, set_thread_environment
from infermeter.measure.memlimit import MemoryLimit, case_limit, enter_limit
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact
from infermeter.results.schema import CaseResult, case_to_dict


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
        runner.result.loading.process_start_s = process_start_s
        if limit_note:
            runner.result.notes.append(limit_note)
        if not runner.load():
            if limit is not None and runner.result.memory.peak_rss_mb is None:
                # The peak it reached before failing (under a limit, likely the allocation that hit it), which the
                # parent's polling may not have seen in a worker that fails within its first 0.2 s.
                runner.result.memory.peak_rss_mb = peak_rss_mb()
            conn.send(("result", case_to_dict(runner.result)))
            return

        def started(result: CaseResult) -> None:
            result.loading.process_start_s = process_start_s

        serve_bursts(conn, runner, started)
    except BaseException as exc:  # anything at all: report it rather than die silently
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


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
