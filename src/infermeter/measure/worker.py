"""Running one case: in-process (`execute_case`) or in a fresh worker process (`run_isolated`).

Isolation gives each case its own peak memory, cold start and crash: a segfault, abort or hang in a
framework becomes a `crashed` or `timeout` result, and the sweep goes on.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from typing import Any

from infermeter.case import Case
from infermeter.measure.execute import PhaseCallback, blank_result, execute_case, unavailable_reason
from infermeter.models.spec import ModelSpec
from infermeter.results.schema import CaseResult, CaseWarning, case_from_dict, case_to_dict

__all__ = ["PhaseCallback", "blank_result", "execute_case", "run_in_process", "run_isolated", "unavailable_reason"]

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _set_thread_environment(threads: int) -> None:
    # Must happen before any framework is imported: OpenMP reads these once, at start-up.
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)


def _child_main(conn: multiprocessing.connection.Connection, spec: ModelSpec, case: Case) -> None:
    entered = time.time()
    # The parent owns Ctrl-C: it stops this worker itself, after saving what was measured.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_thread_environment(case.threads)
    try:
        import psutil

        # Interpreter start-up and infermeter's own imports: part of any cold start (10 ms clock resolution).
        process_start_s = max(0.0, entered - psutil.Process().create_time())
        result = execute_case(spec, case, on_phase=lambda name: conn.send(("phase", name)))
        result.process_start_s = process_start_s
        conn.send(("result", case_to_dict(result)))
    except BaseException as exc:  # anything at all: report it rather than die silently
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _signal_name(exitcode: int) -> str:
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def run_isolated(spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None) -> CaseResult:
    """Run `case` in a fresh `spawn`ed worker with a `case_timeout_s` limit; never raises for the case's
    own failures (they become `failed`, `crashed` or `timeout` results)."""
    reason = unavailable_reason(spec, case)
    if reason:
        return blank_result(spec, case, "unavailable", reason)
    context = multiprocessing.get_context("spawn")
    parent_conn, child_conn = context.Pipe(duplex=False)
    process = context.Process(target=_child_main, args=(child_conn, spec, case), daemon=True)
    started = time.perf_counter()
    process.start()
    child_conn.close()
    deadline = started + case.settings.case_timeout_s
    message: tuple[str, Any] | None = None
    try:
        while (remaining := deadline - time.perf_counter()) > 0:
            if parent_conn.poll(min(remaining, 0.2)):
                try:
                    kind, payload = parent_conn.recv()
                except EOFError:
                    break  # the worker died without a word: judged below from its exit code
                if kind != "phase":
                    message = (kind, payload)
                    break
                if on_phase:
                    on_phase(payload)
            elif not process.is_alive() and not parent_conn.poll():
                break
    except BaseException:  # Ctrl-C in the parent: stop the worker, then let the sweep save and exit
        process.kill()
        process.join()
        raise
    if message is None:
        # The pipe closes a moment before the process is reaped: give a dead worker time to be seen as dead.
        process.join(timeout=max(0.0, min(5.0, deadline - time.perf_counter())))
        if process.is_alive():
            process.kill()
            process.join()
            error = f"no result within --case-timeout {case.settings.case_timeout_s:g} s; the worker was killed"
            return _finish(blank_result(spec, case, "timeout", error), started)
        code = process.exitcode or 0
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        error = f"the worker process {how} before reporting a result"
        return _finish(blank_result(spec, case, "crashed", error), started)
    process.join(timeout=10)
    if process.is_alive():
        process.kill()
    kind, payload = message
    if kind == "error":
        return _finish(blank_result(spec, case, "failed", payload), started)
    return case_from_dict(payload)


def _finish(result: CaseResult, started: float) -> CaseResult:
    result.duration_s = time.perf_counter() - started
    return result


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
