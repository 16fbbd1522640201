"""The measurement loop: first inference apart, warm-up apart, rotation of inputs and the stop rule."""

from __future__ import annotations

from typing import Any

from infermeter.backends.base import Session
from infermeter.core.case import MeasureSettings
from infermeter.measure.loop import run_loop


class FakeClock:
    """A clock that advances only when the fake session runs: each run costs a scripted number of ns."""

    def __init__(self) -> None:
        self.now_ns = 0

    def __call__(self) -> int:
        return self.now_ns


class ScriptedSession(Session):
    """Costs `costs_ns[i]` on its i-th run (the last value repeats) and records which input it saw."""

    def __init__(self, clock: FakeClock, costs_ns: list[int]) -> None:
        super().__init__()
        self.clock = clock
        self.costs_ns = costs_ns
        self.seen: list[Any] = []
        self.syncs = 0

    def run(self, prepared: Any) -> Any:
        cost = self.costs_ns[min(len(self.seen), len(self.costs_ns) - 1)]
        self.seen.append(prepared)
        self.clock.now_ns += cost
        return None

    def sync(self) -> None:
        self.syncs += 1

    def effective_precision(self) -> str:
        return "fp32"


def test_first_inference_and_warmup_never_enter_the_samples() -> None:
    clock = FakeClock()
    session = ScriptedSession(clock, [50_000_000, 9_000_000, 8_000_000, 1_000_000])
    settings = MeasureSettings(warmup_iterations=2, min_iterations=5, min_time_s=0.0, max_time_s=10.0)
    result = run_loop(session, ["a", "b", "c"], settings, clock=clock)
    assert result.first_inference_ns == 50_000_000
    assert result.warmup_ns == [9_000_000, 8_000_000]
    assert result.samples_ns == [1_000_000] * 5
    assert result.stopped_by == "rule"
    assert session.syncs == 1 + 2 + 5  # sync inside every timed region


def test_inputs_are_rotated() -> None:
    clock = FakeClock()
    session = ScriptedSession(clock, [1000])
    settings = MeasureSettings(warmup_iterations=1, min_iterations=6, min_time_s=0.0)
    run_loop(session, ["a", "b", "c"], settings, clock=clock)
    timed = session.seen[2:]
    assert timed == ["a", "b", "c", "a", "b", "c"]


def test_min_time_extends_the_run_beyond_min_iterations() -> None:
    clock = FakeClock()
    session = ScriptedSession(clock, [10_000_000])  # 10 ms per run
    settings = MeasureSettings(warmup_iterations=0, min_iterations=3, min_time_s=0.1, max_time_s=5.0)
    result = run_loop(session, ["a"], settings, clock=clock)
    assert len(result.samples_ns) == 10  # 0.1 s / 10 ms
    assert result.stopped_by == "rule"


def test_max_time_wins_over_min_iterations() -> None:
    clock = FakeClock()
    session = ScriptedSession(clock, [100_000_000])  # 100 ms per run
    settings = MeasureSettings(warmup_iterations=0, min_iterations=100, min_time_s=0.0, max_time_s=0.5)
    result = run_loop(session, ["a"], settings, clock=clock)
    assert len(result.samples_ns) == 5
    assert result.stopped_by == "max_time"
