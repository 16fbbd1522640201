"""The levels a load sweep steps through, for every protocol: concurrency doubling 1, 2, 4 … up to a top (the KServe
`load --scenario sweep`, `llm load --scenario sweep` and `tune-batching`'s climb), or rate steps up to a top rate
(`load --qps --scenario sweep`); and `step_levels`, which measures them in order for `load`, `llm load` and
`tune-batching` alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from infermeter.core.errors import UsageError

L = TypeVar("L")
S = TypeVar("S")


def doubling_levels(max_level: int) -> tuple[int, ...]:
    """1, 2, 4 … up to `max_level`, which is always the last level even when not a power of two."""
    if max_level < 1:
        raise UsageError(f"the sweep's top level must be at least 1, not {max_level}")
    levels = [1]
    while levels[-1] * 2 <= max_level:
        levels.append(levels[-1] * 2)
    if levels[-1] != max_level:
        levels.append(max_level)
    return tuple(levels)


def rate_steps(top_rate: float, steps: int) -> tuple[float, ...]:
    """`steps` evenly spaced rates up to `top_rate`: top/steps, 2·top/steps … top."""
    if not top_rate > 0 or steps < 1:
        raise UsageError(f"a rate sweep needs a positive top rate and at least one step, not {top_rate:g} × {steps}")
    return tuple(top_rate * (i + 1) / steps for i in range(steps))


def step_levels(
    levels: Iterable[L],
    measure: Callable[[L], S],
    on_level: Callable[[S], None] | None = None,
    last: Callable[[S], bool] | None = None,
) -> list[S]:
    """Measure each level in order, telling `on_level` of each as soon as it is measured (to save or print it
    before the next starts); stop after a level that `last` says ends the climb (e.g. its P99 missed the SLO:
    latency only grows with more load)."""
    measured: list[S] = []
    for level in levels:
        measured.append(measure(level))
        if on_level is not None:
            on_level(measured[-1])
        if last is not None and last(measured[-1]):
            break
    return measured
