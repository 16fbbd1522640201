"""`llm load --find-peak`: the highest Poisson request rate at which the SLO holds against an OpenAI-compatible
server, by bisection on measured rates (`load.peak.search_peak`, the search KServe `load --find-peak` runs), each
probe a rate level of the sweep (`serving_sweep.measure_level`), saved as it is measured. The SLO holds at a probe when
the level is `ok` (not failed, not short outputs) and at least `slo_target` of its requests met the bounds."""

from __future__ import annotations

import time
from collections.abc import Callable

from infermeter.core.errors import UsageError
from infermeter.llm.serving_sweep import SweepSettings, measure_level
from infermeter.load.peak import PeakSearch, search_peak
from infermeter.results.records import ServingLevel, read_record
from infermeter.results.schema import CaseResult

MAX_PROBES = 6
TOLERANCE = 0.1  # relative width of the final interval: each probe is a whole level of requests


def find_rate_peak(
    settings: SweepSettings, on_level: Callable[[CaseResult], None] | None = None
) -> tuple[list[CaseResult], PeakSearch]:
    """Probe from the one rate of `settings.levels` (the highest to try) down and bisect; the probes' cases, in the
    order measured, and the search."""
    if settings.mode != "rate" or len(settings.levels) != 1:
        raise UsageError("--find-peak starts from one rate, the highest to try: give --rates R (e.g. --rates 8)")
    if not settings.endpoint.slo.is_set:
        raise UsageError("--find-peak needs an SLO: --slo ttft_ms=MS, tpot_ms=MS or latency_ms=MS")
    settings.endpoint.endpoint()  # a bad URL is a usage error before anything is sent
    t0_s = time.perf_counter()

    def held(case: CaseResult) -> bool:
        level = read_record(case, ServingLevel)
        return case.status == "ok" and bool(level and level.slo_held)

    top = settings.levels[0]
    found = search_peak(
        lambda rate: measure_level(settings, rate, t0_s),
        held,
        top,
        max_probes=MAX_PROBES,
        tolerance=TOLERANCE,
        min_rate=top / 64,
        on_probe=on_level,
    )
    return [case for _, case in found.measured], found.search
