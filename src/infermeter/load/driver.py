"""Driving a served model (a `load.target.LoadTarget`): run scenarios, sweep, and find the peak QPS whose P99 meets
the SLO."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from infermeter.core.errors import BackendError, UsageError
from infermeter.load.generator import LoadRun, run_async, run_closed_loop, run_server
from infermeter.load.http_client import RequestPool
from infermeter.load.levels import doubling_levels, rate_steps
from infermeter.load.peak import PeakSearch, search_peak
from infermeter.load.server_stats import StatsSnapshot, difference, snapshot
from infermeter.load.target import LoadTarget
from infermeter.load.verdict import LoadSummary, summarize
from infermeter.models.dim_defaults import sizing_hint


@dataclass(frozen=True)
class RunSettings:
    """One load run: its scenario (`server` needs `qps`; `single-stream`; `offline`, a closed loop at
    `concurrency`), how long it lasts, how long a straggler is waited for, and the warm-up before it."""

    scenario: str
    duration_s: float
    _: KW_ONLY  # the rest by keyword
    qps: float | None = None
    concurrency: int = 1
    seed: int = 0
    timeout_s: float = 30.0
    warmup_s: float = 0.5
    max_connections: int = 1024
    arrivals: str = "poisson"  # the server scenario's schedule (`load.arrivals`)


def _measure(
    target: LoadTarget,
    body: Callable[[RequestPool], Any],
    warmup_s: float,
    warmup_concurrency: int,
    max_connections: int,
) -> LoadRun:
    async def main() -> LoadRun:
        pool = target.open_pool(max_connections)
        try:
            if warmup_s > 0:
                warm = await run_closed_loop(pool, target.requests, warmup_concurrency, warmup_s, scenario="warmup")
                if warm.ok == 0:
                    kinds = ", ".join(f"{k} {v}" for k, v in warm.errors.most_common()) or "no answer"
                    said = "".join(f"; {kind}: {text}" for kind, text in pool.messages.items() if text)
                    sized = next((n for n in target.notes if n.startswith("inputs sized by default")), None)
                    raise BackendError(
                        f"every warm-up request to {target.base_url} failed ({kinds}){said}{sizing_hint(sized)}"
                    )
                pool.messages.clear()
            stats_before = await _server_stats(target)
            run: LoadRun = await body(pool)
            run.messages = dict(pool.messages)
            run.server = difference(stats_before, await _server_stats(target))
            return run
        finally:
            await pool.aclose()

    return run_async(main)


async def _server_stats(target: LoadTarget) -> StatsSnapshot | None:
    """The server's statistics (HTTP targets: Triton's statistics extension), None for gRPC or a server without."""
    if target.base_url.startswith("grpc://"):
        return None
    return await snapshot(target.base_url, target.model_name, dict(target.headers))


def run_once(target: LoadTarget, run: RunSettings) -> LoadRun:
    """One run of `server` (needs qps; Poisson or constant arrivals), `single-stream` or `offline` (closed loop at
    `concurrency`)."""
    if run.scenario == "server":
        if not run.qps or run.qps <= 0:
            raise UsageError("the server scenario needs --qps (a positive rate); or use --find-peak with --slo-p99-ms")
        rate = run.qps
        return _measure(
            target,
            lambda pool: run_server(pool, target.requests, rate, run.duration_s, run.seed, run.timeout_s, run.arrivals),
            run.warmup_s,
            4,
            run.max_connections,
        )
    width = 1 if run.scenario == "single-stream" else run.concurrency
    return _measure(
        target,
        lambda pool: run_closed_loop(pool, target.requests, width, run.duration_s, run.timeout_s, run.scenario),
        run.warmup_s,
        width,
        run.max_connections,
    )


def sweep_steps(qps: float | None, concurrency: int, steps: int) -> list[tuple[str, float]]:
    """Sweep points: QPS steps (qps/steps … qps, server scenario) when qps is given, else concurrency
    doubling 1, 2, 4 … up to `concurrency` (closed loop); the levels of `load.levels`, as `llm load`'s."""
    if qps:
        return [("server", rate) for rate in rate_steps(qps, steps)]
    return [("offline", float(level)) for level in doubling_levels(concurrency)]


def find_peak(
    target: LoadTarget,
    slo_p99_ms: float,
    duration_s: float,
    seed: int = 0,
    concurrency: int = 16,
    max_probes: int = 8,
    tolerance: float = 0.05,
    on_probe: Callable[[LoadSummary], None] | None = None,
    slo_latency_ms: float | None = None,
) -> tuple[LoadSummary | None, list[LoadSummary], PeakSearch]:
    """The highest QPS whose server-scenario P99 meets the SLO (and is otherwise VALID): a closed-loop run
    bounds the capacity, then bisection on QPS (`load.peak.search_peak`) until the bracket is within `tolerance`."""
    capacity_run = run_once(target, RunSettings("offline", duration_s, concurrency=concurrency))
    capacity = summarize(capacity_run, None, target.batch, seed, slo_latency_ms)
    if on_probe:
        on_probe(capacity)

    def measure(qps: float) -> LoadSummary:
        run = run_once(target, RunSettings("server", duration_s, qps=qps, seed=seed))
        return summarize(run, slo_p99_ms, target.batch, seed, slo_latency_ms)

    high = max(capacity.run.achieved_qps * 1.1, 1.0)
    found = search_peak(measure, lambda s: s.valid, high, max_probes=max_probes, tolerance=tolerance, on_probe=on_probe)
    return found.best, [capacity, *(summary for _, summary in found.measured)], found.search
