"""A synthetic backend for testing the harness without any framework.

Options (`--option null.KEY=VALUE`):
  latency_ms   median latency of one inference (default 1.0)
  dist         constant | lognormal | exponential (default constant)
  sigma        spread of the lognormal distribution (default 0.1)
  wait         spin | sleep: how the latency is spent (spin is accurate to microseconds; default spin)
  load_s       seconds `load` takes (default 0)
  fail         load | run: raise an error there
  crash        load | run: kill the process with SIGSEGV there (abort: SIGABRT with crash_signal=abort)
  hang         load | run: never return from there
  after        with fail/crash/hang at run: how many runs succeed first (default 0)
  precision    the effective precision to report (default: the requested one)
  slow_file    a path: while a file exists there, every run takes slow_factor times longer (a machine-wide
               slowdown that tests switch on and off, shared by every worker)
  slow_factor  the slowdown factor while slow_file exists (default 1.3)
  seed         seed of the latency draws (default 0)
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.backends.base import Backend, Session
from infermeter.case import PRECISIONS, Case
from infermeter.errors import BackendError, UsageError
from infermeter.models.spec import ModelSpec

_KNOWN_OPTIONS = {
    "latency_ms",
    "dist",
    "sigma",
    "wait",
    "load_s",
    "fail",
    "crash",
    "crash_signal",
    "hang",
    "after",
}
_KNOWN_OPTIONS |= {"precision", "seed", "slow_file", "slow_factor"}


def _misbehave(what: str, signal_name: str) -> None:
    if what == "fail":
        raise BackendError("null backend: failure requested with null.fail")
    if what == "crash":
        os.kill(os.getpid(), signal.SIGABRT if signal_name == "abort" else signal.SIGSEGV)
    if what == "hang":
        while True:
            time.sleep(3600)


class NullSession(Session):
    """Spends a drawn latency per run and returns zeros shaped (batch, 1)."""

    def __init__(self, case: Case, options: dict[str, str]) -> None:
        super().__init__()
        self._precision = options.get("precision", case.precision)
        latency_s = float(options.get("latency_ms", "1.0")) / 1e3
        dist = options.get("dist", "constant")
        rng = np.random.default_rng(int(options.get("seed", "0")))
        # Pre-drawn so that drawing costs nothing inside the timed region.
        size = 1 << 16
        if dist == "constant":
            self._latencies_s = np.full(size, latency_s)
        elif dist == "lognormal":
            self._latencies_s = latency_s * rng.lognormal(0.0, float(options.get("sigma", "0.1")), size)
        elif dist == "exponential":
            self._latencies_s = latency_s / np.log(2) * rng.exponential(1.0, size)
        else:
            raise UsageError(f"null.dist={dist!r}: use constant, lognormal or exponential")
        self._sleep = options.get("wait", "spin") == "sleep"
        self._runs = 0
        self._after = int(options.get("after", "0"))
        self._signal = options.get("crash_signal", "segv")
        self._on_run = [w for w in ("fail", "crash", "hang") if options.get(w) == "run"]
        slow_file = options.get("slow_file")
        self._slow_file = Path(slow_file) if slow_file else None
        self._slow_factor = float(options.get("slow_factor", "1.3"))

    def run(self, prepared: Any) -> Any:
        if self._on_run and self._runs >= self._after:
            _misbehave(self._on_run[0], self._signal)
        latency = float(self._latencies_s[self._runs & 0xFFFF])
        if self._slow_file is not None and self._slow_file.exists():
            latency *= self._slow_factor
        self._runs += 1
        if self._sleep:
            time.sleep(latency)
        else:
            deadline = time.perf_counter() + latency
            while time.perf_counter() < deadline:
                pass
        batch = next(iter(prepared.values())).shape[0] if prepared else 1
        return [np.zeros((batch, 1), dtype=np.float32)]

    def effective_precision(self) -> str:
        return self._precision


class NullBackend(Backend):
    """Synthetic latencies for testing the harness, statistics, CLI and reports; runs any model."""

    name = "null"
    synthetic = True
    precisions = PRECISIONS
    description = "synthetic latencies for testing the harness (no framework)"

    @classmethod
    def version(cls) -> str | None:
        from infermeter import __version__

        return __version__

    @classmethod
    def available(cls) -> str | None:
        return None

    def load(self, model: ModelSpec, case: Case) -> Session:
        options = {k.removeprefix("null."): v for k, v in case.options if k.startswith("null.")}
        unknown = sorted(set(options) - _KNOWN_OPTIONS)
        if unknown:
            raise UsageError(
                f"unknown null backend option(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN_OPTIONS))}"
            )
        for what in ("fail", "crash", "hang"):
            if options.get(what) == "load":
                _misbehave(what, options.get("crash_signal", "segv"))
        load_s = float(options.get("load_s", "0"))
        if load_s:
            time.sleep(load_s)
        session = NullSession(case, options)
        session.load_phases_s["simulated_load_s"] = load_s
        return session
