"""Running one case: in-process (`execute_case`) or in a fresh worker process (`run_isolated`).

Isolation gives each case its own peak memory, cold start and crash: a segfault, abort or hang in a
framework becomes a `crashed` or `timeout` result, and the sweep goes on.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

import psutil

from infermeter.backends.registry import get_backend
from infermeter.case import Case
from infermeter.errors import InfermeterError
from infermeter.measure.loop import run_loop
from infermeter.models.inputs import generate_feeds, resolve_shapes
from infermeter.models.spec import ModelSpec
from infermeter.results.schema import CaseResult, CaseWarning, case_from_dict, case_to_dict
from infermeter.stats import assess_run, latency_stats, precision_warning

PhaseCallback = Callable[[str], None]
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def now_iso() -> str:
    """The current UTC time, ISO 8601, seconds resolution."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def blank_result(spec: ModelSpec, case: Case, status: str, error: str | None = None) -> CaseResult:
    """A result carrying the case's controlled variables and a status, before (or instead of) measuring."""
    backend = get_backend(case.backend)
    return CaseResult(
        id=case.id,
        model=spec.ref,
        backend=case.backend,
        backend_version=backend.version(),
        device=backend.device,
        batch=case.batch,
        shape_mode=case.shape_mode,
        precision=case.precision,
        precision_effective=None,
        threads=case.threads,
        status=status,
        error=error,
        options=dict(case.options),
        input_shapes={name: list(dims) for name, dims in case.input_shapes},
        started=now_iso(),
    )


def unavailable_reason(spec: ModelSpec, case: Case) -> str | None:
    """Why `case` cannot run here (framework missing, precision unsupported…), checked without loading."""
    backend = get_backend(case.backend)
    return backend.available() or backend.unsupported_reason(spec, case)


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux: the high-water mark of this process's resident memory.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def execute_case(spec: ModelSpec, case: Case, on_phase: PhaseCallback | None = None) -> CaseResult:
    """Load, warm up and measure `case` in this process. Framework errors become a `failed` result."""
    phase = on_phase or (lambda _name: None)
    result = blank_result(spec, case, "ok")
    reason = unavailable_reason(spec, case)
    if reason:
        result.status, result.error = "unavailable", reason
        return result
    started = time.perf_counter()
    settings = case.settings
    session = None
    try:
        shapes = resolve_shapes(spec.inputs, case.batch, case.input_shapes)
        feed_sets = generate_feeds(spec.inputs, shapes, settings.input_sets, settings.seed)
        result.input_shapes = {name: list(dims) for name, dims in shapes.items()}
        result.rss_before_load_mb = psutil.Process().memory_info().rss / 2**20
        phase("loading")
        load_start = time.perf_counter()
        session = get_backend(case.backend)().load(spec, case)
        result.load_s = time.perf_counter() - load_start
        result.load_phases_s = dict(session.load_phases_s)
        result.notes = list(session.notes)
        result.cache_hit = session.cache_hit
        prepared = [session.prepare(feeds) for feeds in feed_sets]
        phase("first inference")
        samples = run_loop(session, prepared, settings, on_phase=phase)
        result.precision_effective = session.effective_precision()
    except InfermeterError as exc:
        result.status, result.error = "failed", str(exc)
    except Exception as exc:
        # A framework's own exception: keep its type and first line, the full trace goes to the notes.
        result.status, result.error = (
            "failed",
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
        )
        result.notes.append(traceback.format_exc(limit=8))
    finally:
        if session is not None:
            session.close()
    result.duration_s = time.perf_counter() - started
    if result.status != "ok":
        return result
    samples_ms = [ns / 1e6 for ns in samples.samples_ns]
    stats = latency_stats(samples_ms, settings.seed)
    result.latency_ms = stats
    result.samples_ms = samples_ms
    result.iterations = len(samples_ms)
    result.warmup_iterations = len(samples.warmup_ns)
    result.warmup_ms = [ns / 1e6 for ns in samples.warmup_ns]
    result.first_inference_ms = samples.first_inference_ns / 1e6
    result.throughput = case.batch * len(samples_ms) / (sum(samples.samples_ns) / 1e9)
    result.peak_rss_mb = _peak_rss_mb()
    result.warnings = assess_run(samples_ms, stats, result.first_inference_ms)
    mismatch = precision_warning(case.precision, result.precision_effective)
    if mismatch:
        result.warnings.append(mismatch)
    if samples.stopped_by == "max_time":
        result.warnings.append(
            CaseWarning(
                "max_time_reached",
                f"stopped at --max-time {settings.max_time_s:g} s after {len(samples_ms)} of "
                f"{settings.min_iterations} iterations; raise --max-time for the full count",
            )
        )
    return result


def _set_thread_environment(threads: int) -> None:
    # Must happen before any framework is imported: OpenMP reads these once, at start-up.
    for variable in THREAD_VARIABLES:
        os.environ[variable] = str(threads)


def _child_main(conn: multiprocessing.connection.Connection, spec: ModelSpec, case: Case) -> None:
    # The parent owns Ctrl-C: it stops this worker itself, after saving what was measured.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_thread_environment(case.threads)
    try:
        result = execute_case(spec, case, on_phase=lambda name: conn.send(("phase", name)))
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
