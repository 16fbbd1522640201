"""Running one case: in-process (`execute_case`) or in a fresh worker process (`run_isolated`).

Isolation gives each case its own peak memory, cold start and crash: a segfault, abort or hang in a
framework becomes a `crashed` or `timeout` result, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

from infermeter.case import Case
from infermeter.interrupts import deferred_interrupts
from infermeter.measure.execute import (
    CaseRunner,
    PhaseCallback,
    blank_result,
    execute_case,
    record_failure,
    unavailable_reason,
)
from infermeter.measure.stoprule import Burst, StopState, run_until_stopped
from infermeter.models.spec import ModelSpec
from infermeter.results.schema import CaseResult, CaseWarning, case_from_dict, case_to_dict

__all__ = [
    "CaseWorker",
    "PhaseCallback",
    "WorkerEnded",
    "blank_result",
    "execute_case",
    "run_in_process",
    "run_isolated",
    "unavailable_reason",
]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _set_thread_environment(threads: int) -> None:
    # Must happen before any framework is imported: OpenMP reads these once, at start-up.
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)


def _die_with_parent() -> None:
    """Linux: have the kernel kill this worker when its parent dies (even by SIGKILL), so that no orphan keeps
    burning the CPUs stuck inside a framework's native code. Elsewhere the pipe's EOF is the only signal."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _child_main(conn: multiprocessing.connection.Connection, spec: ModelSpec, case: Case) -> None:
    """The worker: load the case, say `ready`, then serve `burst` requests until `finish` (see CaseWorker)."""
    entered = time.time()
    _die_with_parent()
    # The parent owns Ctrl-C: it stops this worker itself, after saving what was measured.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_thread_environment(case.threads)
    try:
        import psutil

        # Interpreter start-up and infermeter's own imports: part of any cold start (10 ms clock resolution).
        process_start_s = max(0.0, entered - psutil.Process().create_time())
        runner = CaseRunner(spec, case, on_phase=lambda name: conn.send(("phase", name)))
        runner.result.process_start_s = process_start_s
        if not runner.load():
            conn.send(("result", case_to_dict(runner.result)))
            return
        conn.send(("ready", None))
        while True:
            # Blocked in recv while other cases run: a parked worker takes no CPU.
            command, argument = conn.recv()
            if command == "burst":
                try:
                    conn.send(("burst", runner.burst(*argument)))
                except Exception as exc:  # the framework failed mid-run: a failed result, with the reason
                    runner.close()
                    record_failure(runner.result, exc)
                    conn.send(("result", case_to_dict(runner.result)))
                    return
            else:
                state, interleaved = argument
                result = runner.finish(state, interleaved)
                result.process_start_s = process_start_s
                conn.send(("result", case_to_dict(result)))
                return
    except BaseException as exc:  # anything at all: report it rather than die silently
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _signal_name(exitcode: int) -> str:
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


class WorkerEnded(Exception):
    """The worker ended before it was asked to finish (failed, crashed, timed out); `result` says how."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.error)
        self.result = result


@contextlib.contextmanager
def _parent_main_hidden() -> Iterator[None]:
    """While a worker starts, the parent's `__main__` is hidden from `spawn`, which would otherwise run the parent's
    script again in the worker (as `__mp_main__`) before the case: a script calling `infermeter.bench` without an
    `if __name__ == "__main__"` guard would start benchmarks inside its own workers, and one with it would still
    load its own imports there, into the case's start-up time and peak memory. A worker needs nothing from
    `__main__` (its target and arguments are infermeter's), so it is the same fresh process whoever starts it."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class CaseWorker:
    """One case in a fresh `spawn`ed process, driven from here: `wait_ready`, then `burst` as often as the stop
    rule or the interleaving asks, then `finish`. The whole life is bounded by the case's `case_timeout_s`.
    This is the one isolation runner: sequential sweeps, interleaved rounds and generation all use it."""

    def __init__(self, spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None) -> None:
        self.spec, self.case, self.on_phase = spec, case, on_phase
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe(duplex=True)
        self.process = context.Process(target=_child_main, args=(child_conn, spec, case), daemon=True)
        self.started = time.perf_counter()
        self.deadline = self.started + case.settings.case_timeout_s
        try:
            # A Ctrl-C while the child is still reading its start-up data would make it print an EOFError
            # traceback: held until the start is complete, then delivered, and the fresh worker stopped.
            with deferred_interrupts(), _parent_main_hidden():
                self.process.start()
        except BaseException:
            self.kill()
            raise
        finally:
            child_conn.close()

    def rss_mb(self) -> float:
        """The worker's resident memory now (0 once it has exited)."""
        import psutil

        try:
            return psutil.Process(self.process.pid).memory_info().rss / 2**20
        except psutil.Error:
            return 0.0

    def receive(self) -> tuple[str, Any]:
        """The worker's next message other than a phase; WorkerEnded when it ends without one in time."""
        try:
            while (remaining := self.deadline - time.perf_counter()) > 0:
                if self._conn.poll(min(remaining, 0.2)):
                    try:
                        kind, payload = self._conn.recv()
                    except EOFError:
                        break  # the worker died without a word: judged below from its exit code
                    if kind != "phase":
                        return kind, payload
                    if self.on_phase:
                        self.on_phase(payload)
                elif not self.process.is_alive() and not self._conn.poll():
                    break
        except BaseException:  # Ctrl-C in the parent: stop the worker, then let the sweep save and exit
            self.kill()
            raise
        raise WorkerEnded(self._ended_silently())

    def _ended_silently(self) -> CaseResult:
        spec, case = self.spec, self.case
        # The pipe closes a moment before the process is reaped: give a dead worker time to be seen as dead.
        self.process.join(timeout=max(0.0, min(5.0, self.deadline - time.perf_counter())))
        if self.process.is_alive():
            self.kill()
            error = f"no result within --case-timeout {case.settings.case_timeout_s:g} s; the worker was killed"
            return self._finish(blank_result(spec, case, "timeout", error))
        code = self.process.exitcode or 0
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        return self._finish(blank_result(spec, case, "crashed", f"the worker process {how} before reporting a result"))

    def _finish(self, result: CaseResult) -> CaseResult:
        result.duration_s = time.perf_counter() - self.started
        return result

    def _final(self, kind: str, payload: Any) -> CaseResult:
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
        if kind == "error":
            return self._finish(blank_result(self.spec, self.case, "failed", payload))
        return case_from_dict(payload)

    def wait_ready(self) -> CaseResult | None:
        """None once the case is loaded and warmed up; else its final result (unavailable, failed...)."""
        try:
            kind, payload = self.receive()
        except WorkerEnded as ended:
            return ended.result
        return None if kind == "ready" else self._final(kind, payload)

    def burst(self, min_s: float, max_s: float, min_iterations: int = 1, rewarm: int = 0) -> Burst:
        """One timed burst in the worker (see CaseRunner.burst); WorkerEnded when the case failed or the worker
        died meanwhile."""
        self._conn.send(("burst", (min_s, max_s, min_iterations, rewarm)))
        kind, payload = self.receive()
        if kind != "burst":
            raise WorkerEnded(self._final(kind, payload))
        burst: Burst = payload
        return burst

    def finish(self, state: StopState, interleaved: bool = False) -> CaseResult:
        """The case's result: statistics over every burst, warnings, parity when asked for (see
        CaseRunner.finish)."""
        self._conn.send(("finish", (state, interleaved)))
        try:
            return self._final(*self.receive())
        except WorkerEnded as ended:
            return ended.result

    def wait_until_idle(self, poll_s: float = 0.01, limit_s: float = 0.5) -> float:
        """Wait until the worker's CPU time stops growing (its thread pools stop spinning after a burst: ONNX
        Runtime's spin for about 50 ms here), at most `limit_s`; the seconds waited."""
        import psutil

        start = time.perf_counter()
        try:
            process = psutil.Process(self.process.pid)
            used = sum(process.cpu_times()[:2])
            while time.perf_counter() - start < limit_s:
                time.sleep(poll_s)
                now = sum(process.cpu_times()[:2])
                if now == used:
                    break
                used = now
        except psutil.Error:
            pass  # the worker has gone: nothing left to wait for
        return time.perf_counter() - start

    def kill(self) -> None:
        """Stop the worker at once (idempotent)."""
        if self.process.pid is None:
            return  # never started
        if self.process.is_alive():
            self.process.kill()
        self.process.join()


def run_isolated(spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None) -> CaseResult:
    """Run `case` alone in a fresh worker until its stop rule, within `case_timeout_s`; never raises for the
    case's own failures (they become `failed`, `crashed` or `timeout` results)."""
    reason = unavailable_reason(spec, case)
    if reason:
        return blank_result(spec, case, "unavailable", reason)
    worker = CaseWorker(spec, case, on_phase)
    try:
        ended = worker.wait_ready()
        if ended is not None:
            return ended
        return worker.finish(run_until_stopped(worker, case.settings))
    except WorkerEnded as ended:
        return ended.result
    except BaseException:
        worker.kill()
        raise


def run_in_process(spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None) -> CaseResult:
    """`--no-isolation`: run in this process (for debugging); peak memory is then the whole process's."""
    _set_thread_environment(case.threads)
    result = execute_case(spec, case, on_phase)
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
