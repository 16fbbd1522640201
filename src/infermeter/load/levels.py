"""The levels a load sweep steps through, for every protocol: concurrency doubling 1, 2, 4 … up to a top (the KServe
`load --scenario sweep` and `llm load --scenario sweep`), or rate steps up to a top rate (`load --qps --scenario
sweep`)."""

from __future__ import annotations

from infermeter.core.errors import UsageError


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
