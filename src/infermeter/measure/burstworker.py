"""A case driven in bursts in a worker process, whatever kind of case it is (an inference case, a generation case):
both ends of the pipe. The worker loads the case, says `ready`, then serves `burst` requests until `finish`; the
parent owns the stop rule (`measure.stoprule`) and, for a group, the interleaved rounds (`measure.interleave`).
"""

from __future__ import annotations

import multiprocessing.connection
import time
from collections.abc import Callable
from typing import Any, Protocol

from infermeter.measure.isolation import PhaseCallback, WorkerFailure, WorkerGone, WorkerJob, WorkerProcess, WorkerSetup
from infermeter.measure.memlimit import mark_oom
from infermeter.measure.stoprule import Burst, StopState
from infermeter.results.schema import CaseResult, case_from_dict, case_to_dict

# A result for a case that ended without one of its own: (status, error) -> the case's result with that status.
BlankResult = Callable[[str, str], CaseResult]


class BurstRunner(Protocol):
    """One loaded case in a worker: timed `burst`s, then `finish` (`measure.execute.CaseRunner`,
    `generate.runner.GenerationRunner`)."""

    result: CaseResult

    def burst(self, min_s: float, max_s: float, min_iterations: int = 1, rewarm: int = 0) -> Burst:
        """Time the case until `min_iterations` samples and `min_s` seconds, or `max_s` seconds."""

    def finish(self, state: StopState, interleaved: bool = False) -> CaseResult:
        """The case's result over every burst."""

    def close(self) -> None:
        """Release what the case loaded (idempotent)."""


def serve_bursts(
    conn: multiprocessing.connection.Connection,
    runner: BurstRunner,
    on_result: Callable[[CaseResult], None] | None = None,
) -> None:
    """The worker's side, once `runner` has loaded: say `ready`, then serve `burst` requests until `finish`. A
    framework failure mid-burst ends the case as `failed` with the reason (`on_result` sees the final result)."""
    from infermeter.measure.execute import record_failure

    conn.send(("ready", None))
    while True:
        # Blocked in recv while other cases run: a parked worker takes no CPU.
        command, argument = conn.recv()
        if command == "burst":
            try:
                conn.send(("burst", runner.burst(*argument)))
                continue
            except Exception as exc:  # the framework failed mid-run: a failed result, with the reason
                runner.close()
                record_failure(runner.result, exc)
                result = runner.result
        else:
            state, interleaved = argument
            result = runner.finish(state, interleaved)
        if on_result is not None:
            on_result(result)
        conn.send(("result", case_to_dict(result)))
        return


class WorkerEnded(Exception):
    """The worker ended before it was asked to finish (failed, crashed, timed out); `result` says how."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.error)
        self.result = result


class BurstWorker(WorkerProcess):
    """The parent's side of a case in a fresh worker: `wait_ready`, then `burst` as often as the stop rule or the
    interleaving asks, then `finish`; the whole life bounded by `timeout_s` (`--case-timeout`). `blank` makes the
    case's result when the worker ends without one; `setup`: how the worker starts (under a memory limit, a case
    that dies of it is judged `oom`)."""

    def __init__(
        self,
        job: WorkerJob,
        args: tuple[Any, ...],
        timeout_s: float,
        blank: BlankResult,
        on_phase: PhaseCallback | None = None,
        environment: dict[str, str] | None = None,
        setup: WorkerSetup | None = None,
    ) -> None:
        self.blank, self.limit = blank, (setup.limit if setup is not None else None)
        super().__init__(job, args, timeout_s, on_phase, environment, setup=setup)

    def _judged(self, result: CaseResult) -> CaseResult:
        """A final result, marked `oom` when the case's memory limit stopped it."""
        if self.limit is not None:
            mark_oom(result, self.limit, self.peak_seen_mb)
        return result

    def _ended(self, status: str, error: str) -> CaseResult:
        result = self.blank(status, error)
        result.duration_s = time.perf_counter() - self.started
        return self._judged(result)

    def _next(self) -> tuple[str, Any]:
        try:
            return self.receive()
        except WorkerGone as gone:
            error = gone.error.replace(f"within {self.timeout_s:g} s", f"within --case-timeout {self.timeout_s:g} s")
            raise WorkerEnded(self._ended(gone.status, error)) from None

    def _final(self, kind: str, payload: Any) -> CaseResult:
        self.join()
        if kind == "error":
            failure: WorkerFailure = payload
            return self._ended(failure.status, failure.message)
        return self._judged(case_from_dict(payload))

    def wait_ready(self) -> CaseResult | None:
        """None once the case is loaded and warmed up; else its final result (unavailable, failed...)."""
        try:
            kind, payload = self._next()
        except WorkerEnded as ended:
            return ended.result
        return None if kind == "ready" else self._final(kind, payload)

    def burst(self, min_s: float, max_s: float, min_iterations: int = 1, rewarm: int = 0) -> Burst:
        """One timed burst in the worker; WorkerEnded when the case failed or the worker died meanwhile."""
        self.send("burst", (min_s, max_s, min_iterations, rewarm))
        kind, payload = self._next()
        if kind != "burst":
            raise WorkerEnded(self._final(kind, payload))
        burst: Burst = payload
        return burst

    def finish(self, state: StopState, interleaved: bool = False) -> CaseResult:
        """The case's result: statistics over every burst and warnings."""
        self.send("finish", (state, interleaved))
        try:
            return self._final(*self._next())
        except WorkerEnded as ended:
            return ended.result


def run_worker_until_stopped(worker: BurstWorker, settings: Any) -> CaseResult:
    """A sequential case: `worker` driven until its stop rule (`settings`: its `MeasureSettings`), then finished;
    the worker is killed if the parent is interrupted."""
    from infermeter.measure.stoprule import run_until_stopped

    try:
        failed = worker.wait_ready()
        if failed is not None:
            return failed
        return worker.finish(run_until_stopped(worker, settings))
    except WorkerEnded as ended:
        return ended.result
    except BaseException:
        worker.kill()
        raise
