"""`tune-batching`: serve the model under each batching policy (max-batch × max-delay × workers), measure the
latency–throughput curve of each under closed-loop load, and pick the policy with the highest throughput whose
P99 meets the SLO; the pick is then checked under Poisson (server-scenario) load at 90% of that throughput."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from infermeter.load.driver import RunSettings, run_once
from infermeter.load.levels import doubling_levels, step_levels
from infermeter.load.target import prepare_target
from infermeter.load.verdict import LoadSummary, summarize
from infermeter.machine.environment import new_results_file
from infermeter.results.records import TunePoint, write_record
from infermeter.results.schema import ResultsFile
from infermeter.serve.server import spawn_server

if TYPE_CHECKING:
    from infermeter.load.tune_race import PickRace

# The Poisson check runs at this share of the closed-loop throughput of the pick: open-loop arrivals are
# burstier than a closed loop, so the pick must leave this much headroom.
CHECK_LOAD_RATIO = 0.9
# The Poisson check runs at least this long: its P99 is judged in full, and needs the samples.
CHECK_MIN_DURATION_S = 5.0


@dataclass(frozen=True)
class BatchPolicy:
    """One batching configuration of the server."""

    max_batch: int
    max_delay_ms: float
    workers: int

    def label(self) -> str:
        """`b8 d2ms w1`."""
        return f"b{self.max_batch} d{self.max_delay_ms:g}ms w{self.workers}"

    def serve_args(self) -> list[str]:
        """The `infermeter serve` flags of this policy."""
        return [
            "--max-batch",
            str(self.max_batch),
            "--max-delay-ms",
            f"{self.max_delay_ms:g}",
            "--workers",
            str(self.workers),
        ]


@dataclass
class PolicyResult:
    """A policy's curve (one closed-loop run per concurrency level) and its best point within the SLO."""

    policy: BatchPolicy
    curve: list[LoadSummary] = field(default_factory=list)
    error: str | None = None

    @property
    def best(self) -> LoadSummary | None:
        """The highest-throughput point whose P99 meets the SLO with no failed request."""
        valid = [s for s in self.curve if meets_slo(s)]
        return max(valid, key=lambda s: s.throughput) if valid else None


def meets_slo(summary: LoadSummary) -> bool:
    """Every request answered and the P99 within the SLO. (Short tuning points may hold fewer samples than a
    stable P99 needs; the Poisson check of the pick is judged in full.)"""
    stats = summary.stats
    return (
        stats is not None
        and not summary.run.errors
        and summary.slo_p99_ms is not None
        and stats.p99 <= summary.slo_p99_ms
    )


def policies(max_batches: list[int], max_delays_ms: list[float], workers: list[int]) -> list[BatchPolicy]:
    """The grid; a max-delay only matters when batches can form, so max-batch 1 gets a single delay of 0."""
    grid = []
    for batch, delay, count in itertools.product(max_batches, max_delays_ms, workers):
        policy = BatchPolicy(batch, 0.0 if batch == 1 else delay, count)
        if policy not in grid:
            grid.append(policy)
    return grid


def concurrency_levels(policy: BatchPolicy, limit: int) -> list[int]:
    """1, 2, 4 … up to enough requests in flight to fill every worker's batch twice (capped at `limit`)."""
    return list(doubling_levels(min(limit, max(2, 2 * policy.max_batch * policy.workers))))


def measure_policy(
    policy: BatchPolicy,
    model_args: list[str],
    slo_p99_ms: float,
    duration_s: float,
    concurrency_limit: int,
    on_point: Callable[[BatchPolicy, LoadSummary], None] | None = None,
) -> PolicyResult:
    """Serve with `policy` (child process) and climb concurrency until the P99 misses the SLO."""
    result = PolicyResult(policy)
    server = spawn_server([*model_args, *policy.serve_args(), "--max-queue", "4096"])
    try:
        target = prepare_target(server.url)

        def measure(level: int) -> LoadSummary:
            run = run_once(target, RunSettings("offline", duration_s, concurrency=level, warmup_s=0.2))
            return summarize(run, slo_p99_ms, target.batch)

        def point(summary: LoadSummary) -> None:
            result.curve.append(summary)
            if on_point:
                on_point(policy, summary)

        def missed(summary: LoadSummary) -> bool:  # latency only grows with more requests in flight: stop here
            return summary.stats is None or summary.stats.p99 > slo_p99_ms

        step_levels(concurrency_levels(policy, concurrency_limit), measure, point, missed)
    finally:
        server.stop()
    return result


def recommend(results: list[PolicyResult]) -> PolicyResult | None:
    """The policy whose best point has the highest throughput (ties: lower P99)."""
    candidates = [r for r in results if r.best is not None]
    if not candidates:
        return None

    def key(r: PolicyResult) -> tuple[float, float]:
        best = r.best
        assert best is not None and best.stats is not None
        return (best.throughput, -best.stats.p99)

    return max(candidates, key=key)


def check_pick(
    pick: PolicyResult, model_args: list[str], slo_p99_ms: float, duration_s: float, seed: int = 0
) -> LoadSummary:
    """The pick under Poisson arrivals at 90% of its closed-loop throughput: VALID or INVALID with reasons."""
    best = pick.best
    assert best is not None
    qps = max(best.run.achieved_qps * CHECK_LOAD_RATIO, 0.5)
    server = spawn_server([*model_args, *pick.policy.serve_args(), "--max-queue", "4096"])
    try:
        target = prepare_target(server.url)
        run = run_once(target, RunSettings("server", duration_s, qps=qps, seed=seed))
        return summarize(run, slo_p99_ms, target.batch)
    finally:
        server.stop()


def tuning_results(
    results: list[PolicyResult],
    pick: PolicyResult | None,
    model: str,
    backend: str,
    precision: str,
    started: str,
    race: PickRace | None = None,
) -> ResultsFile:
    """Every measured point as a load case (its policy in `serve.*` options), the pick's best point marked
    `tune.pick`: the file `infermeter deploy --load` takes its dynamic batching and instance count from. `race`: the
    pick's race against its runner-up (`load.tune_race`), kept on the pick's point."""
    from infermeter.backends.registry import backend_names, get_backend
    from infermeter.load.verdict import case_result

    version = get_backend(backend).version() if backend in backend_names() else None
    cases = []
    for result in results:
        policy = result.policy
        options = {
            "serve.max_batch": str(policy.max_batch),
            "serve.max_delay_ms": f"{policy.max_delay_ms:g}",
            "serve.workers": str(policy.workers),
        }
        for summary in result.curve:
            case = case_result(summary, model, backend, version, precision, None, options, started, "tune-batching")
            picked = result is pick and summary is result.best
            point = TunePoint(policy.label(), pick=picked)
            if picked and race is not None:
                point = TunePoint(point.policy, True, race.other.policy.label(), race.decision.to_dict())
            write_record(case, point)
            cases.append(case)
    file = new_results_file((), created=started)
    file.cases = cases
    return file
