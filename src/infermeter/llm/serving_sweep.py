"""A serving sweep against an OpenAI-compatible server: closed-loop concurrency levels (1, 2, 4 … max) or
open-loop Poisson request rates, each level run by the one load generator through the OpenAI streaming client
(`openai_client`) and stepped by the one level driver (`load.levels`), each one case with its generation metrics
(`openai_bench`), its place in the sweep (`ServingLevel`) and, when asked, the server's own state while it ran
(`ServerMetrics`).

A level never stops the sweep: a level whose requests failed is kept with its one-line reason, and the caller's
`on_level` (which saves the results file) runs after every level, so what was measured is on disk before the
next level starts. The knee and the max level under the SLO are read from the cases (`serving_verdict`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

from infermeter.core.case import identity_digest
from infermeter.core.errors import UsageError
from infermeter.llm.generation_metrics import RequestTiming
from infermeter.llm.openai_bench import APIS, ERROR_KINDS, EndpointSettings, level_result
from infermeter.llm.openai_client import run_openai_level
from infermeter.llm.server_metrics import MetricsSampler, metrics_sources
from infermeter.load.arrivals import Arrivals
from infermeter.load.generator import run_async
from infermeter.load.levels import step_levels
from infermeter.results.records import GenerationSummary, ServingLevel, read_record, write_record
from infermeter.results.records.serving import SWEEP_MODES
from infermeter.results.schema import CaseResult

DEFAULT_SLO_TARGET = 0.9


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
            timings = run_async(lambda: run_openai_level(endpoint, concurrency=int(level)))
        else:
            arrivals = Arrivals(level, settings.arrivals, settings.seed)
            timings = run_async(lambda: run_openai_level(endpoint, arrivals=arrivals))
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
    return step_levels(settings.levels, lambda level: measure_level(settings, level, t0_s), on_level)


def measure_level(settings: SweepSettings, level: float, t0_s: float) -> CaseResult:
    """One level's case; a client that broke gives a failed level with its reason, never an exception."""
    try:
        return _measure(settings, level, t0_s)
    except (OSError, RuntimeError, ValueError) as exc:  # the client itself broke: keep the sweep going
        first = str(exc).splitlines()[0] if str(exc) else ""
        return _failed_level(settings, level, f"{type(exc).__name__}: {first}")
