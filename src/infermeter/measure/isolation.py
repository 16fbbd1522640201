"""The one isolation runner: a function in a fresh `spawn`ed worker process, talking over a pipe, bounded by a
deadline. Cases (`measure.worker.CaseWorker`), soaks, generation cases and builds (`measure.worker.build_isolated`)
run in it, so each gets its own memory, its own crash and its own timeout, and the parent goes on. Every worker
enters through one `worker_main`, which does the start-up they all need before their job runs.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from infermeter.core.errors import describe_exception, failure_status
from infermeter.core.interrupts import deferred_interrupts
from infermeter.measure.memlimit import MemoryLimit, enter_limit
from infermeter.results.env import THREAD_COUNT_VARIABLES

PhaseCallback = Callable[[str], None]


def set_thread_environment(threads: int) -> None:
    # Must happen before any framework is imported: OpenMP reads these once, at start-up.
    for variable in THREAD_COUNT_VARIABLES:
        os.environ[variable] = str(threads)


def die_with_parent() -> None:
    """Linux: have the kernel kill this worker when its parent dies (even by SIGKILL), so that no orphan keeps
    burning the CPUs stuck inside a framework's native code. Elsewhere the pipe's EOF is the only signal."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker sets up before its job runs: `threads`, the thread-count variables (before any framework is
    imported: OpenMP reads them once); `limit`, the case's memory limit (entered before anything is loaded)."""

    threads: int | None = None
    limit: MemoryLimit | None = None


@dataclass(frozen=True)
class WorkerStarted:
    """Handed to a worker's job: `entered_s`, the wall clock when the worker's own code began (after the
    interpreter's start-up and infermeter's imports); `limit_note`, what entering the memory limit said, if any."""

    entered_s: float
    limit_note: str | None = None


@dataclass(frozen=True)
class WorkerFailure:
    """What a worker's job raised: the status it means for a case (`failure_status`) and its one-line reason
    (`describe_exception`)."""

    status: str
    message: str

    def __str__(self) -> str:
        return self.message


# A worker's job: `job(conn, started, *args)` sends `(kind, payload)` messages over `conn`.
WorkerJob = Callable[..., None]


def worker_main(
    conn: multiprocessing.connection.Connection, job: WorkerJob, setup: WorkerSetup, args: tuple[Any, ...]
) -> None:
    """The one entry point of every worker process: die with the parent, leave Ctrl-C to it, enter the memory
    limit, set the thread counts, then run `job(conn, WorkerStarted, *args)`. Whatever the job raises (a
    MemoryError included) goes back as ("error", `WorkerFailure`) rather than dying silently; the pipe is closed."""
    entered_s = time.time()
    die_with_parent()
    # The parent owns Ctrl-C: it stops this worker itself, after saving what was measured.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    limit_note = enter_limit(setup.limit) if setup.limit is not None else None
    if setup.threads is not None:
        set_thread_environment(setup.threads)
    try:
        job(conn, WorkerStarted(entered_s, limit_note), *args)
    except BaseException as exc:  # anything at all: report it rather than die silently
        conn.send(("error", WorkerFailure(failure_status(exc), describe_exception(exc))))
    finally:
        conn.close()


def _signal_name(exitcode: int) -> str:
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


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


@contextlib.contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """`variables` set in this process's environment while a worker is spawned (a spawned worker is a fresh exec,
    which inherits it: LD_PRELOAD and MALLOC_ARENA_MAX must be there from its start), then restored."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class WorkerProcess:
    """A job run in a fresh `spawn`ed process that talks over a pipe, bounded by a deadline: the one isolation
    runner. `job(conn, started, *args)` runs under `worker_main` with `setup`, and sends `(kind, payload)` messages;
    `("phase", name)` ones go to `on_phase`; a job that raised sends ("error", `WorkerFailure`).
    A worker that dies or outlives its deadline is reported as `WorkerGone` with the status and reason.
    `environment`: variables the worker starts with (a per-case allocator, `measure.allocator`).
    `idle_timeout`: the deadline counts from the worker's last message rather than its start, so a long run that
    keeps reporting progress (a soak of N requests) is bounded by its silences, not by a total guessed beforehand."""

    def __init__(
        self,
        job: WorkerJob,
        args: tuple[Any, ...],
        timeout_s: float,
        on_phase: PhaseCallback | None,
        environment: dict[str, str] | None = None,
        idle_timeout: bool = False,
        setup: WorkerSetup | None = None,
    ) -> None:
        self.on_phase, self.timeout_s, self.idle_timeout = on_phase, timeout_s, idle_timeout
        # The highest RSS seen while waiting on the worker (polled): what a case killed for memory had reached.
        self.peak_seen_mb = 0.0
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe(duplex=True)
        self.process = context.Process(
            target=worker_main, args=(child_conn, job, setup or WorkerSetup(), args), daemon=True
        )
        self.started = time.perf_counter()
        self.deadline = self.started + timeout_s
        try:
            # A Ctrl-C while the child is still reading its start-up data would make it print an EOFError
            # traceback: held until the start is complete, then delivered, and the fresh worker stopped.
            with deferred_interrupts(), _parent_main_hidden(), _environment(environment or {}):
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

    def send(self, kind: str, payload: Any) -> None:
        """A command to the worker."""
        self._conn.send((kind, payload))

    def receive(self) -> tuple[str, Any]:
        """The worker's next message other than a phase; `WorkerGone` when it ends without one in time."""
        try:
            while (remaining := self.deadline - time.perf_counter()) > 0:
                if self._conn.poll(min(remaining, 0.2)):
                    try:
                        kind, payload = self._conn.recv()
                    except EOFError:
                        break  # the worker died without a word: judged below from its exit code
                    if self.idle_timeout:
                        self.deadline = time.perf_counter() + self.timeout_s
                    if kind != "phase":
                        return kind, payload
                    if self.on_phase:
                        self.on_phase(payload)
                elif not self.process.is_alive() and not self._conn.poll():
                    break
                else:
                    self.peak_seen_mb = max(self.peak_seen_mb, self.rss_mb())
        except BaseException:  # Ctrl-C in the parent: stop the worker, then let the caller save and exit
            self.kill()
            raise
        raise self._gone()

    def _gone(self) -> WorkerGone:
        # The pipe closes a moment before the process is reaped: give a dead worker time to be seen as dead.
        self.process.join(timeout=max(0.0, min(5.0, self.deadline - time.perf_counter())))
        if self.process.is_alive():
            self.kill()
            waited = "no progress reported for" if self.idle_timeout else "no result within"
            return WorkerGone("timeout", f"{waited} {self.timeout_s:g} s; the worker was killed")
        code = self.process.exitcode or 0
        how = f"was killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
        return WorkerGone("crashed", f"the worker process {how} before reporting a result")

    def join(self) -> None:
        """Wait for a worker that has said its last word to exit (killed after 10 s)."""
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()

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


class WorkerGone(Exception):
    """A worker ended without its result: `status` is `timeout` or `crashed`, `error` says how."""

    def __init__(self, status: str, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status, error


def run_in_worker(job: WorkerJob, args: tuple[Any, ...], timeout_s: float) -> tuple[str, Any]:
    """`job(conn, started, *args)` in a `WorkerProcess` that sends one final `(kind, payload)` message: that
    message, or ("timeout" | "crashed", reason) when the worker ended without one (for workers that are not
    measured cases: scoring, NNCF's accuracy control)."""
    worker = WorkerProcess(job, args, timeout_s, None)
    try:
        message = worker.receive()
    except WorkerGone as gone:
        return gone.status, gone.error
    worker.join()
    return message


def call_in_worker(function: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> tuple[str, Any]:
    """`function(*args)` in a worker process of its own (a module-level function: it travels by name):
    ("result", what it returned), ("error", `WorkerFailure` of what it raised), or ("timeout" | "crashed",
    reason) when the worker ended without either."""
    return run_in_worker(_call, (function, args), timeout_s)


def _call(
    conn: multiprocessing.connection.Connection,
    _started: WorkerStarted,
    function: Callable[..., Any],
    args: tuple[Any, ...],
) -> None:
    conn.send(("result", function(*args)))
