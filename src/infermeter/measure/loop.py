"""The measurement loop: first inference alone, warm-up, then a timed loop with a stop rule.

Only `run()` and `sync()` sit between the two clock reads. Inputs are prepared before the loop and rotated;
samples are kept as integer nanoseconds from a monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from infermeter.backends.base import Session
from infermeter.core.case import MeasureSettings


@dataclass(frozen=True)
class LoopSamples:
    """Raw timings of one run, in nanoseconds. `stopped_by` is `rule` (iterations and min-time met) or
    `max_time`."""

    first_inference_ns: int
    warmup_ns: list[int]
    samples_ns: list[int]
    stopped_by: str


def warm_up(
    session: Session,
    prepared_sets: Sequence[Any],
    warmup_iterations: int,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> tuple[int, list[int]]:
    """Time the first inference alone, then `warmup_iterations` more (rotating inputs): (first_ns, warm-up ns)."""
    run, sync = session.run, session.sync
    count = len(prepared_sets)
    t0 = clock()
    run(prepared_sets[0])
    sync()
    first_ns = clock() - t0
    warmup: list[int] = []
    for i in range(warmup_iterations):
        feeds = prepared_sets[(i + 1) % count]
        t0 = clock()
        run(feeds)
        sync()
        warmup.append(clock() - t0)
    return first_ns, warmup


def timed_loop(
    session: Session,
    prepared_sets: Sequence[Any],
    settings: MeasureSettings,
    clock: Callable[[], int] = time.perf_counter_ns,
    first_set: int = 0,
) -> tuple[list[int], str]:
    """The timed loop with the stop rule: (samples in ns, `rule` or `max_time`). Sample i used input
    (first_set + i) % count, so that successive bursts carry on the rotation."""
    run, sync = session.run, session.sync
    sets = list(prepared_sets)
    count = len(sets)
    min_iterations = settings.min_iterations
    min_end = int(settings.min_time_s * 1e9)
    max_end = int(settings.max_time_s * 1e9)
    samples: list[int] = []
    append = samples.append
    i = 0
    j = first_set
    start = clock()
    stopped_by = "rule"
    # The loop body is kept minimal: its own cost per iteration is measured by benchmarks/harness_overhead.py.
    while True:
        feeds = sets[j % count]
        t0 = clock()
        run(feeds)
        sync()
        t1 = clock()
        append(t1 - t0)
        i += 1
        j += 1
        elapsed = t1 - start
        if elapsed >= max_end:
            stopped_by = "rule" if i >= min_iterations and elapsed >= min_end else "max_time"
            break
        if i >= min_iterations and elapsed >= min_end:
            break
    return samples, stopped_by


def run_loop(
    session: Session,
    prepared_sets: Sequence[Any],
    settings: MeasureSettings,
    clock: Callable[[], int] = time.perf_counter_ns,
    on_phase: Callable[[str], None] | None = None,
) -> LoopSamples:
    """Measure `session` on the rotated `prepared_sets` following `settings`' stop rule.

    Stop rule: at least `min_iterations` samples and at least `min_time_s` of timed loop, at most `max_time_s`
    (max-time wins). The first inference and the warm-up iterations are timed apart and never mixed in.
    """
    sets = list(prepared_sets)
    first_ns, warmup = warm_up(session, sets, settings.warmup_iterations, clock)
    if on_phase:
        on_phase("measuring")
    samples, stopped_by = timed_loop(session, sets, settings, clock)
    return LoopSamples(first_ns, warmup, samples, stopped_by)
