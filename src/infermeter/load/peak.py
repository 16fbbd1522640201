"""One peak search for every protocol: the highest arrival rate at which the SLO still holds, by bisection on
measured rates (not only on listed levels), with how sure it is: the interval between the highest rate where the
SLO held and the lowest rate above it where it did not. `search_peak` runs it on whole measured levels (`load
--find-peak`, `llm load --find-peak`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

S = TypeVar("S")


@dataclass(frozen=True)
class PeakSearch:
    """The probes (rate, SLO held) in the order run, the highest rate that held, and the lowest above it that
    did not (None: the SLO held at every rate probed, or failed at every one)."""

    probes: tuple[tuple[float, bool], ...]
    held_at: float | None
    failed_at: float | None

    def line(self, unit: str) -> str:
        """`peak 12.5 QPS: the SLO stops holding between 12.5 and 13.1 QPS` and its other cases."""
        if self.held_at is None:
            lowest = min((rate for rate, _ in self.probes), default=0.0)
            return f"no rate met the SLO (the lowest probed, {lowest:.3g} {unit}, did not)"
        if self.failed_at is None:
            return f"peak ≥ {self.held_at:.3g} {unit}: the SLO held at the highest rate probed; probe higher"
        return (
            f"peak {self.held_at:.3g} {unit}: the SLO stops holding between {self.held_at:.3g} and "
            f"{self.failed_at:.3g} {unit}"
        )


def bisect_peak(
    probe: Callable[[float], bool],
    high: float,
    max_probes: int = 8,
    tolerance: float = 0.05,
    min_rate: float = 0.5,
) -> PeakSearch:
    """Probe `high` first, then halve until the SLO holds, then bisect between the highest rate that held and the
    lowest that failed until they are within `tolerance` (relative) or `max_probes` ran; never below `min_rate`."""
    probes: list[tuple[float, bool]] = []
    low = 0.0
    failed: float | None = None
    rate = high
    for _ in range(max_probes):
        held = probe(rate)
        probes.append((rate, held))
        if held:
            low = max(low, rate)
        else:
            failed = rate if failed is None else min(failed, rate)
        if failed is None or (low > 0 and (failed - low) / failed <= tolerance):
            break
        rate = (low + failed) / 2 if low > 0 else failed / 2
        if rate < min_rate:
            break
    return PeakSearch(tuple(probes), low or None, failed)


@dataclass(frozen=True)
class PeakFound(Generic[S]):
    """A peak search on measured levels: the search, and each probe's rate and measurement in the order run."""

    search: PeakSearch
    measured: tuple[tuple[float, S], ...]

    @property
    def best(self) -> S | None:
        """The measurement at the highest rate where the SLO held (None when it held nowhere)."""
        return next((m for rate, m in self.measured if rate == self.search.held_at), None)


def search_peak(
    measure: Callable[[float], S],
    held: Callable[[S], bool],
    high: float,
    *,
    max_probes: int = 8,
    tolerance: float = 0.05,
    min_rate: float = 0.5,
    on_probe: Callable[[S], None] | None = None,
) -> PeakFound[S]:
    """`bisect_peak` from `high`, each probe a level measured at its rate (`measure`) and judged by `held`;
    `on_probe` hears of each measurement as soon as it is taken (to save or print it)."""
    measured: list[tuple[float, S]] = []

    def probe(rate: float) -> bool:
        measurement = measure(rate)
        measured.append((rate, measurement))
        if on_probe is not None:
            on_probe(measurement)
        return held(measurement)

    search = bisect_peak(probe, high, max_probes, tolerance, min_rate)
    return PeakFound(search, tuple(measured))
