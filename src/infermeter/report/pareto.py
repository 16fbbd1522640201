"""Pareto fronts over measured objectives (shared by the HTML report and `advise`). Pure."""

from __future__ import annotations

from collections.abc import Sequence


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool]) -> bool:
    """True when point `a` is at least as good as `b` in every objective and strictly better in one."""
    better = False
    for x, y, up in zip(a, b, maximize, strict=True):
        if (x < y) if up else (x > y):
            return False
        if x != y:
            better = True
    return better


def pareto_front(points: Sequence[Sequence[float]], maximize: Sequence[bool]) -> list[int]:
    """Indices of the points that no other point dominates, in input order. `maximize[k]` says whether
    objective k is better high (throughput) or low (latency, memory). Duplicated points are all kept."""
    return [
        i
        for i, point in enumerate(points)
        if not any(dominates(other, point, maximize) for j, other in enumerate(points) if j != i)
    ]
