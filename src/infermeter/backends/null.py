"""A synthetic backend for testing the harness without any framework.

Its options (`--option null.KEY=VALUE`, listed by `infermeter backends --options`) set the latency it spends,
its spread, a build to simulate (`null.build_s`: the build stage then makes an artifact for it), and failures to
inject (fail, crash or hang at build, load or run). `slow_file` names a path: while a file
exists there, every run takes `slow_factor` times longer (a machine-wide slowdown that tests switch on and off,
shared by every worker). `load_mb`, `leak_kb` and `leak_until` simulate memory: weights held from load, and a leak
per run that goes on or stops (a plateau), for the soak's bookkeeping.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.backends.base import AutoTuning, Backend, Session
from infermeter.backends.options import Choice, Integer, Number, Text
from infermeter.core.case import PRECISIONS, Case
from infermeter.core.errors import BackendError, UsageError
from infermeter.models.spec import ModelSpec
from infermeter.results.artifact import Artifact, BuildOutput, Phase

_WHERE = ("none", "build", "load", "run")


def _check_seconds(value: str) -> None:
    try:
        if float(value) >= 0:
            return
    except ValueError:
        pass
    raise UsageError(f"null.build_s={value!r}: use a number of seconds >= 0")


def _build_s(case: Case) -> float | None:
    """The seconds a null build takes, or None when the case has nothing to build."""
    text = BUILD_S.value(case)
    return None if text is None else float(text)


def _check_precision(value: str) -> None:
    if value not in PRECISIONS:
        raise UsageError(f"null.precision={value!r}: use one of {', '.join(PRECISIONS)}")


LATENCY_MS = Number(key="null.latency_ms", default=1.0, help="median latency of one inference, ms")
DIST = Choice(key="null.dist", choices=("constant", "lognormal", "exponential"), default="constant",
              help="distribution of the latencies")  # fmt: skip
SIGMA = Number(key="null.sigma", default=0.1, help="spread of the lognormal distribution")
WAIT = Choice(key="null.wait", choices=("spin", "sleep"), default="spin",
              help="how the latency is spent (spin is accurate to microseconds)")  # fmt: skip
LOAD_S = Number(key="null.load_s", default=0.0, help="seconds `load` takes")
BUILD_S = Text(key="null.build_s", help="seconds a build takes (default: nothing to build)", describe="seconds",
               check=_check_seconds)  # fmt: skip
FAIL = Choice(key="null.fail", choices=_WHERE, default="none", help="raise an error at build, load or run")
CRASH = Choice(key="null.crash", choices=_WHERE, default="none", help="kill the process with a signal there")
CRASH_SIGNAL = Choice(key="null.crash_signal", choices=("segv", "abort"), default="segv", help="the signal of crash")
HANG = Choice(key="null.hang", choices=_WHERE, default="none", help="never return from build, load or run")
AFTER = Integer(key="null.after", default=0, help="with fail/crash/hang at run: how many runs succeed first")
PRECISION = Text(key="null.precision", help="the effective precision to report (default: the requested one)",
                 describe=" | ".join(PRECISIONS), check=_check_precision)  # fmt: skip
SLOW_FILE = Text(key="null.slow_file", help="while a file exists at this path, every run is slow_factor slower",
                 describe="path")  # fmt: skip
SLOW_FACTOR = Number(key="null.slow_factor", default=1.3, help="the slowdown factor while slow_file exists")
SEED = Integer(key="null.seed", default=0, help="seed of the latency draws")
TUNE_TRIALS = Integer(key="null.tune_trials", default=0,
                      help="simulated auto-tuning in the build: trials of trial_s seconds each; a tuned case runs "
                           "tuned_speedup times faster")  # fmt: skip
TUNE_MINUTES = Number(key="null.tune_minutes", default=0.0, help="bound on the simulated tuning's minutes (0: none)")
TRIAL_S = Number(key="null.trial_s", default=0.01, help="seconds one simulated tuning trial takes")
TUNED_SPEEDUP = Number(key="null.tuned_speedup", default=2.0, help="how much faster a tuned case runs")
LOAD_MB = Number(key="null.load_mb", default=0.0, help="MB the session allocates (and touches) at load")
LEAK_KB = Number(key="null.leak_kb", default=0.0, help="simulated leak: KB each run allocates and keeps")
LEAK_UNTIL = Integer(key="null.leak_until", default=0,
                     help="with leak_kb: runs after which the leak stops, a plateau (0: it never stops)")  # fmt: skip
MISBEHAVIOURS = {"fail": FAIL, "crash": CRASH, "hang": HANG}


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

    def __init__(self, case: Case) -> None:
        super().__init__()
        self._precision = PRECISION.value(case) or case.precision
        latency_s = LATENCY_MS.value(case) / 1e3 / (TUNED_SPEEDUP.value(case) if TUNE_TRIALS.value(case) else 1.0)
        dist = DIST.value(case)
        rng = np.random.default_rng(SEED.value(case))
        # Pre-drawn so that drawing costs nothing inside the timed region.
        size = 1 << 16
        if dist == "lognormal":
            self._latencies_s = latency_s * rng.lognormal(0.0, SIGMA.value(case), size)
        elif dist == "exponential":
            self._latencies_s = latency_s / np.log(2) * rng.exponential(1.0, size)
        else:
            self._latencies_s = np.full(size, latency_s)
        self._sleep = WAIT.value(case) == "sleep"
        self._runs = 0
        self._after = AFTER.value(case)
        self._signal = CRASH_SIGNAL.value(case)
        self._on_run = [what for what, option in MISBEHAVIOURS.items() if option.value(case) == "run"]
        slow_file = SLOW_FILE.value(case)
        self._slow_file = Path(slow_file) if slow_file else None
        self._slow_factor = SLOW_FACTOR.value(case)
        # Simulated memory, touched so that it is resident: a model's weights, then a leak or a plateau.
        self._held = [np.ones(int(LOAD_MB.value(case) * 2**20), np.uint8)]
        self._leak_bytes = int(LEAK_KB.value(case) * 1024)
        self._leak_until = LEAK_UNTIL.value(case)

    def run(self, prepared: Any) -> Any:
        if self._on_run and self._runs >= self._after:
            _misbehave(self._on_run[0], self._signal)
        latency = float(self._latencies_s[self._runs & 0xFFFF])
        if self._slow_file is not None and self._slow_file.exists():
            latency *= self._slow_factor
        self._runs += 1
        if self._leak_bytes and (not self._leak_until or self._runs <= self._leak_until):
            self._held.append(np.ones(self._leak_bytes, np.uint8))
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
    options = (
        *(LATENCY_MS, DIST, SIGMA, WAIT, LOAD_S, BUILD_S, SEED),
        *(FAIL, CRASH, CRASH_SIGNAL, HANG, AFTER, PRECISION, SLOW_FILE, SLOW_FACTOR),
        *(TUNE_TRIALS, TUNE_MINUTES, TRIAL_S, TUNED_SPEEDUP),
        *(LOAD_MB, LEAK_KB, LEAK_UNTIL),
    )
    auto_tuning = AutoTuning(TUNE_TRIALS.key, TUNE_MINUTES.key, prior_s_per_trial=0.01)

    @classmethod
    def version(cls) -> str | None:
        from infermeter import __version__

        return __version__

    @classmethod
    def available(cls) -> str | None:
        return None

    artifact_suffix = ".txt"

    def artifact_key(self, model: ModelSpec, case: Case) -> dict[str, object] | None:
        build_s = _build_s(case)
        if build_s is None and not TUNE_TRIALS.value(case):
            return None
        tuning = [TUNE_TRIALS.value(case), TUNE_MINUTES.value(case), TRIAL_S.value(case)]
        return {"build_s": build_s, "batch": case.batch, "misbehave": _where(case, "build"), "tuning": tuning}

    def build(self, model: ModelSpec, case: Case, target: Path) -> BuildOutput:
        _misbehave_at("build", case)
        build_s = _build_s(case) or 0.0
        time.sleep(build_s)
        phases: dict[str, float] = {Phase.COMPILE: build_s}
        if TUNE_TRIALS.value(case):
            tune_s = TUNE_TRIALS.value(case) * TRIAL_S.value(case)
            bound_s = TUNE_MINUTES.value(case) * 60
            phases[Phase.TUNE] = min(tune_s, bound_s) if bound_s else tune_s
            time.sleep(phases[Phase.TUNE])
        target.write_text(f"null artifact for {case.id}")
        return BuildOutput(phases, ["null: simulated build"])

    def load(self, model: ModelSpec, case: Case, artifact: Artifact | None = None) -> Session:
        _misbehave_at("load", case)
        if artifact is not None and not Path(artifact.path).read_text().startswith("null artifact"):
            raise BackendError(f"null backend: the artifact {artifact.path} is not one the null build wrote")
        load_s = LOAD_S.value(case)
        if load_s:
            time.sleep(load_s)
        session = NullSession(case)
        session.load_phases_s[Phase.SESSION_CREATE] = load_s
        return session


def _where(case: Case, stage: str) -> list[str]:
    """The misbehaviours asked for at `stage` (build, load or run)."""
    return [what for what, option in MISBEHAVIOURS.items() if option.value(case) == stage]


def _misbehave_at(stage: str, case: Case) -> None:
    for what in _where(case, stage):
        _misbehave(what, CRASH_SIGNAL.value(case))
