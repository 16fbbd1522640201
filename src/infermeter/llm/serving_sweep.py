"""A serving sweep against an OpenAI-compatible server: closed-loop concurrency levels (1, 2, 4 … max) or
open-loop Poisson request rates, each level one case with its generation metrics (`openai_bench`), its place
in the sweep (`ServingLevel`) and, when asked, the server's own state while it ran (`ServerMetrics`).

A level never stops the sweep: a level whose requests failed is kept with its one-line reason, and the caller's
`on_level` (which saves the results file) runs after every level, so what was measured is on disk before the
next level starts. The knee and the max level under the SLO are read from the cases (`serving_verdict`).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

from infermeter.core.case import identity_digest
from infermeter.core.errors import UsageError
from infermeter.llm.generation_metrics import RequestTiming
from infermeter.llm.openai_bench import (
    APIS,
    ERROR_KINDS,
    EndpointSettings,
    fresh_level,
    level_result,
    run_level,
    stream_request,
)
from infermeter.llm.server_metrics import MetricsSampler, metrics_sources
from infermeter.load.arrivals import Arrivals, paced
from infermeter.results.records import GenerationSummary, ServingLevel, read_record, write_record
from infermeter.results.records.serving import SWEEP_MODES
from infermeter.results.schema import CaseResult

DEFAULT_SLO_TARGET = 0.9
# A rate level sends this many seconds' worth of requests at its rate (at least MIN_RATE_REQUESTS).
RATE_LEVEL_S = 10.0
MIN_RATE_REQUESTS = 16


@dataclass(frozen=True)
class SweepSettings:
    """A sweep: what to send (`endpoint`), the levels of `mode` ("concurrency" or "rate", whose requests are due
    at `arrivals` times), its name (`series`, the URL when empty), and whether to read the server's metrics
    endpoints every `metrics_interval_s`."""

    endpoint: EndpointSettings
    mode: str = "concurrency"
    _: KW_ONLY  # the rest by keyword
    levels: tuple[float, ...] = (1, 2, 4)
    series: str = ""
    slo_target: float = DEFAULT_SLO_TARGET
    server_metrics: bool = False
    metrics_interval_s: float = 0.5
    seed: int = 0
    arrivals: str = "poisson"

    def name(self) -> str:
        """The sweep's name: `series`, or the server's URL."""
        return self.series or self.endpoint.url


def rate_requests(endpoint: EndpointSettings, rate: float) -> int:
    """Requests of one rate level: --requests, else RATE_LEVEL_S seconds' worth (at least MIN_RATE_REQUESTS)."""
    if endpoint.requests is not None:
        return endpoint.requests
    return max(MIN_RATE_REQUESTS, math.ceil(rate * RATE_LEVEL_S))


async def run_rate_level(
    endpoint: EndpointSettings, rate: float, seed: int, arrivals: str = "poisson"
) -> list[RequestTiming]:
    """One open-loop level: requests are due at the arrival times of `load.arrivals` (Poisson or constant, mean
    rate `rate`/s), whatever is in flight (so a slow server builds a queue, as under real traffic); each request's
    clock starts at its scheduled time, as in the KServe load generator, with the client's lag beside."""
    import httpx

    schedule_s = Arrivals(rate, arrivals, seed).offsets_s(count=rate_requests(endpoint, rate))
    endpoint = fresh_level(endpoint)
    timeout = httpx.Timeout(endpoint.request_timeout_s, connect=min(10.0, endpoint.request_timeout_s))
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:
        tasks = [
            asyncio.create_task(stream_request(client, endpoint, issue.index, issue))
            async for issue in paced(schedule_s)
        ]
        return list(await asyncio.gather(*tasks))


def _first_message(timings: Sequence[RequestTiming], kind: str) -> str:
    """The first error text of `kind`, the server's `error.message` when the body is an OpenAI error object."""
    text = next((t.error or "" for t in timings if t.error_kind == kind), "")
    try:
        error = json.loads(text).get("error")
        text = str(error.get("message") if isinstance(error, dict) else error or text)
    except (ValueError, AttributeError):
        pass
    return " ".join(text.split())[:160]


def failure_line(timings: Sequence[RequestTiming]) -> str | None:
    """One line for a level whose requests failed: how many, the main kind, what it means and what the server
    said; None when every request succeeded."""
    failed = [t for t in timings if not t.ok]
    if not failed:
        return None
    kinds = Counter(t.error_kind or "no_output" for t in failed)
    kind, _ = kinds.most_common(1)[0]
    meaning = ERROR_KINDS.get("http_<status>" if kind.startswith("http_") else kind, kind)
    head = f"all {len(timings)}" if len(failed) == len(timings) else f"{len(failed)} of {len(timings)}"
    others = ", ".join(f"{k} ×{n}" for k, n in kinds.items() if k != kind)
    message = _first_message(failed, kind)
    line = f"{head} requests failed: {kind} ({meaning})" + (f": {message}" if message else "")
    return line + (f"; also {others}" if others else "")


def _level_case(settings: SweepSettings, level: float, timings: list[RequestTiming]) -> CaseResult:
    """The level's case: openai_bench's generation case, renamed for its sweep, with its ServingLevel."""
    endpoint = settings.endpoint
    concurrency = int(level) if settings.mode == "concurrency" else 0
    result = level_result(endpoint, concurrency, timings)
    if settings.mode == "rate" or settings.series:
        tag = f"c{concurrency}" if settings.mode == "concurrency" else f"r{level:g}"
        # The level's tag and its sweep's digest: two series against one endpoint keep distinct ids.
        result.id = (
            result.id.replace(f"openai-c{concurrency}-", f"openai-{tag}-", 1)
            + f"-{identity_digest(settings.name(), 6)}"
        )
    if settings.mode == "rate":  # open loop: no fixed number of clients
        result.extra.pop("concurrency", None)
        result.options.pop("concurrency", None)
        result.options["request_rate_per_s"] = f"{level:g}"
    if settings.series:
        result.options["series"] = settings.series
    slo = endpoint.slo
    attainment = None
    if slo.is_set:
        summary = read_record(result, GenerationSummary)
        attainment = (summary.slo_met if summary else 0) / len(timings) if timings else 0.0
    line = failure_line(timings)
    if line and result.status == "failed":
        result.error = line
    elif line:
        result.notes.append(line)
    write_record(result, ServingLevel(settings.name(), settings.mode, level, attainment, settings.slo_target, line))
    return result


def _failed_level(settings: SweepSettings, level: float, reason: str) -> CaseResult:
    """A level that could not run at all (an unexpected error in the client), kept with its reason."""
    result = _level_case(settings, level, [])
    result.status = "failed"
    result.error = reason
    write_record(result, ServingLevel(settings.name(), settings.mode, level, None, settings.slo_target, reason))
    return result


def _measure(settings: SweepSettings, level: float, t0_s: float) -> CaseResult:
    endpoint = settings.endpoint
    sampler = None
    if settings.server_metrics:
        sampler = MetricsSampler(metrics_sources(endpoint.url), settings.metrics_interval_s, t0_s)
        sampler.__enter__()
    try:
        if settings.mode == "concurrency":
            timings = asyncio.run(run_level(endpoint, int(level)))
        else:
            timings = asyncio.run(run_rate_level(endpoint, level, settings.seed, settings.arrivals))
    finally:
        if sampler is not None:
            sampler.__exit__(None, None, None)
    result = _level_case(settings, level, timings)
    if sampler is not None:
        write_record(result, sampler.record())
    return result


def run_sweep(settings: SweepSettings, on_level: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    """Measure every level in order, one case each; `on_level` runs after each (to save and report it)."""
    if settings.mode not in SWEEP_MODES:
        raise UsageError(f"sweep mode {settings.mode!r} is not one of {', '.join(SWEEP_MODES)}")
    if settings.endpoint.api not in APIS:
        raise UsageError(f"--api-kind {settings.endpoint.api!r} is not one of {', '.join(APIS)}")
    if not settings.levels:
        raise UsageError("a sweep needs at least one level")
    settings.endpoint.endpoint()  # a bad URL is a usage error before anything is sent
    t0_s = time.perf_counter()
    results = []
    for level in settings.levels:
        results.append(measure_level(settings, level, t0_s))
        if on_level:
            on_level(results[-1])
    return results


def measure_level(settings: SweepSettings, level: float, t0_s: float) -> CaseResult:
    """One level's case; a client that broke gives a failed level with its reason, never an exception."""
    try:
        return _measure(settings, level, t0_s)
    except (OSError, RuntimeError, ValueError) as exc:  # the client itself broke: keep the sweep going
        first = str(exc).splitlines()[0] if str(exc) else ""
        return _failed_level(settings, level, f"{type(exc).__name__}: {first}")
