"""Judging a load run (VALID/INVALID against the SLO, with the reasons, as LoadGen prints them) and turning it
into a results-file case that `report` and `compare` read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from infermeter.core.case import load_case_id
from infermeter.figures.latency_stats import latency_stats, min_samples_for
from infermeter.load.generator import LoadRun
from infermeter.load.slo import goodput
from infermeter.results.records import LoadRecord, write_record
from infermeter.results.schema import CaseResult, CaseWarning, LatencyStats, ResultsFile, TimingFigures

if TYPE_CHECKING:
    from infermeter.load.target import LoadTarget

# The generator is trusted while its P99 scheduling lag stays under this (the capacity target).
MAX_LAG_P99_MS = 1.0
# Below this share of the offered rate the server did not keep up, whatever its latency says.
MIN_ACHIEVED_RATIO = 0.9


@dataclass
class LoadSummary:
    """One scenario run, judged: figures, VALID/INVALID and why, and warnings."""

    run: LoadRun
    slo_p99_ms: float | None
    _: KW_ONLY  # the rest by keyword
    batch: int
    stats: LatencyStats | None
    lag_p99_ms: float | None
    valid: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[CaseWarning] = field(default_factory=list)
    slo_latency_ms: float | None = None  # --slo latency_ms: the goodput bound
    slo_met: int | None = None  # successful requests within it
    goodput_qps: float | None = None  # those per second (`load.slo.goodput`)

    @property
    def throughput(self) -> float:
        """Samples per second: achieved requests per second times rows per request."""
        return self.run.achieved_qps * self.batch

    def label(self) -> str:
        """`server @ 120 QPS`, `offline x16`, `single-stream`."""
        run = self.run
        if run.scenario == "server":
            return f"server @ {run.target_qps:g} QPS"
        if run.scenario == "single-stream":
            return "single-stream"
        return f"{run.scenario} x{run.concurrency}"


def refusal_line(run: LoadRun) -> str:
    """One line for a run whose requests failed: how many, by kind, and what the server said (status and message
    of the first refusal of each kind)."""
    failed = sum(run.errors.values())
    kinds = ", ".join(f"{kind} {count}" for kind, count in run.errors.most_common())
    said = "; ".join(
        f"{kind.replace('http_', 'HTTP ')}: {run.messages[kind]}" for kind, _ in run.errors.most_common()
        if run.messages.get(kind)
    )  # fmt: skip
    return f"{failed} of {run.issued} requests failed ({kinds})" + (f": {said}" if said else "")


def summarize(
    run: LoadRun, slo_p99_ms: float | None, batch: int = 1, seed: int = 0, slo_latency_ms: float | None = None
) -> LoadSummary:
    """Statistics and the verdict: INVALID when requests failed, the P99 misses the SLO, too few samples back
    the P99, or (server scenario) the server answered under 90% of the offered rate; with `slo_latency_ms`, the
    goodput: requests per second answered within it."""
    stats = latency_stats(run.latencies_ms, seed) if run.latencies_ms else None
    lag_p99 = float(np.percentile(run.lag_ms, 99)) if run.lag_ms else None
    reasons: list[str] = []
    warnings: list[CaseWarning] = []
    failed = sum(run.errors.values())
    if stats is None:
        reasons.append("no request succeeded")
    if failed:
        reasons.append(refusal_line(run))
    if stats is not None and slo_p99_ms is not None and stats.p99 > slo_p99_ms:
        reasons.append(f"P99 {stats.p99:.2f} ms exceeds the SLO of {slo_p99_ms:g} ms")
    needed = min_samples_for(99)
    if stats is not None and stats.count < needed:
        reasons.append(f"P99 from {stats.count} samples (needs {needed}); raise --duration or --qps")
    if run.scenario == "server" and run.offered_qps > 0 and run.achieved_qps < MIN_ACHIEVED_RATIO * run.offered_qps:
        reasons.append(
            f"achieved {run.achieved_qps:.1f} QPS of {run.offered_qps:.1f} offered: the server did not keep up"
        )
    if lag_p99 is not None and lag_p99 > MAX_LAG_P99_MS:
        warnings.append(
            CaseWarning(
                "generator_lag",
                f"the load generator issued requests late (P99 scheduling lag {lag_p99:.2f} ms > "
                f"{MAX_LAG_P99_MS:g} ms): latencies still count from the scheduled times, but the offered load "
                "was burstier than Poisson; give the generator a free core or lower --qps",
                f"P99 lag {lag_p99:.2f} ms",
            )
        )
    summary = LoadSummary(
        run,
        slo_p99_ms,
        batch=batch,
        stats=stats,
        lag_p99_ms=lag_p99,
        valid=not reasons,
        reasons=reasons,
        warnings=warnings,
    )
    if slo_latency_ms is not None:
        summary.slo_latency_ms = slo_latency_ms
        summary.slo_met, summary.goodput_qps = goodput(run.latencies_ms, slo_latency_ms, run.elapsed_s)
    return summary


def case_result(
    summary: LoadSummary,
    model: str,
    backend: str,
    backend_version: str | None,
    precision: str,
    precision_effective: str | None,
    options: dict[str, str],
    started: str,
    target: str,
) -> CaseResult:
    """A results-file case for one load run: latency stats and samples of the successful requests, throughput
    = achieved QPS × rows per request, load-specific figures in its `LoadRecord`."""
    run = summary.run
    load_options = {"load.scenario": run.scenario}
    if run.target_qps is not None:
        load_options["load.qps"] = f"{run.target_qps:g}"
    if run.concurrency is not None:
        load_options["load.concurrency"] = str(run.concurrency)
    all_options = {**options, **load_options}
    result = CaseResult(
        id=load_case_id(model, backend, precision, summary.batch, run.scenario, all_options),
        model=model,
        backend=backend,
        backend_version=backend_version,
        device="cpu",
        batch=summary.batch,
        shape_mode="dynamic",
        precision=precision,
        precision_effective=precision_effective,
        threads=0,
        status="ok" if summary.stats is not None else "failed",
        error=None if summary.stats is not None else "; ".join(summary.reasons),
        latency_ms=summary.stats,
        timing=TimingFigures(
            samples_ms=list(run.latencies_ms),
            iterations=run.ok,
            throughput=summary.throughput if summary.stats is not None else None,
        ),
        warnings=list(summary.warnings),
        options=all_options,
        isolated=False,
        started=started,
        duration_s=run.elapsed_s,
    )
    write_record(result, load_record(summary, target))
    return result


def load_record(summary: LoadSummary, target: str) -> LoadRecord:
    """The load-specific figures of a case."""
    run = summary.run
    return LoadRecord(
        target=target,
        scenario=run.scenario,
        target_qps=run.target_qps,
        offered_qps=run.offered_qps,
        achieved_qps=run.achieved_qps,
        concurrency=run.concurrency,
        duration_s=run.duration_s,
        issued=run.issued,
        ok=run.ok,
        errors=dict(run.errors),
        slo_p99_ms=summary.slo_p99_ms,
        valid=summary.valid,
        reasons=list(summary.reasons),
        lag_p99_ms=summary.lag_p99_ms,
        lag_max_ms=max(run.lag_ms) if run.lag_ms else None,
        slo_latency_ms=summary.slo_latency_ms,
        slo_met=summary.slo_met,
        goodput_qps=summary.goodput_qps,
        server_batches={str(k): v for k, v in run.server.batches.items()} if run.server else None,
        server_queue_mean_ms=run.server.queue_mean_ms if run.server else None,
    )


def load_results(
    summaries: Sequence[LoadSummary], target: LoadTarget, started: str, url: str, command: Sequence[str]
) -> ResultsFile:
    """The results file of a load command (`command`, handed in by the caller) started at `started`: one case per
    scenario run against `target` at `url`, with the server's parameters and the --data source as options."""
    from infermeter.backends.registry import backend_names, get_backend
    from infermeter.machine.environment import new_results_file

    backend = target.backend
    version = get_backend(backend).version() if backend in backend_names() else None
    options = {"serve." + k: str(v) for k, v in (target.metadata.get("parameters") or {}).items() if k != "backend"}
    if target.data is not None:  # what the requests carried: part of the run's identity
        options["load.data"] = target.data.describe()
    results = new_results_file(command, created=started)
    results.cases = [
        case_result(s, target.model_name, backend, version, target.precision, target.precision_effective, options,
                    started, url)
        for s in summaries
    ]  # fmt: skip
    return results
