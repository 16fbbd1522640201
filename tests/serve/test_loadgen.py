"""The load generator against a server with a known delay (null backend, sleeping): schedule, accounting,
no coordinated omission, verdicts, results files, and the `load` / `tune-batching` commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats
from serve_helpers import run_cli

from infermeter.load.arrivals import poisson_schedule
from infermeter.load.driver import RunSettings, run_once
from infermeter.load.generator import run_async, run_server
from infermeter.load.http_client import ConnectionPool
from infermeter.load.target import prepare_target
from infermeter.load.verdict import summarize
from infermeter.results.io import read_results

SLEEPY = [("null.wait", "sleep")]


def test_poisson_schedule_is_poisson_and_seeded() -> None:
    offsets = poisson_schedule(1000.0, 20.0, seed=3)
    assert offsets[0] > 0 and offsets[-1] < 20.0 and np.all(np.diff(offsets) > 0)
    # The count of a Poisson process over 20 s at 1000/s: mean 20,000, sd ~141.
    assert abs(len(offsets) - 20_000) < 6 * np.sqrt(20_000)
    gaps = np.diff(np.concatenate([[0.0], offsets]))
    assert scipy_stats.kstest(gaps, "expon", args=(0, 1e-3)).pvalue > 1e-3
    np.testing.assert_array_equal(offsets, poisson_schedule(1000.0, 20.0, seed=3))
    assert not np.array_equal(offsets[:100], poisson_schedule(1000.0, 20.0, seed=4)[:100])


def test_server_scenario_follows_the_schedule_and_counts_the_known_delay(serve: Any) -> None:
    url = serve(max_batch=1, options=[("null.latency_ms", "20"), *SLEEPY])
    target = prepare_target(url)
    run = run_once(target, RunSettings("server", 2.0, qps=20.0, seed=5, warmup_s=0.2))
    schedule = poisson_schedule(20.0, 2.0, seed=5)
    assert run.issued == len(schedule) == run.ok
    np.testing.assert_allclose(run.scheduled_s, schedule, atol=1e-6)
    assert not run.errors
    # Every latency contains the 20 ms the server sleeps (a lower bound holds on any machine).
    assert min(run.latencies_ms) >= 20.0
    assert len(run.lag_ms) == run.issued and min(run.lag_ms) >= 0


def test_latency_counts_from_the_schedule_not_the_send(serve: Any) -> None:
    # One connection and a 20 ms server, offered 100 QPS for 1 s: requests queue in the generator. A generator
    # timing from the send would report ~20 ms; from the schedule, the last ones waited about a second.
    url = serve(max_batch=1, max_queue=1000, options=[("null.latency_ms", "20"), *SLEEPY])
    target = prepare_target(url)

    async def main() -> Any:
        pool = ConnectionPool(target.base_url, max_connections=1)
        try:
            return await run_server(pool, target.requests, 100.0, 1.0, seed=1)
        finally:
            pool.close()

    run = run_async(main)
    assert run.ok == run.issued
    backlog_ms = run.issued * 20.0 - 1000.0  # service the schedule demands beyond its one-second window
    assert max(run.latencies_ms) >= 0.9 * backlog_ms
    summary = summarize(run, slo_p99_ms=100.0)
    assert not summary.valid
    assert any("exceeds the SLO" in reason for reason in summary.reasons)


def test_closed_loop_and_errors_by_kind(serve: Any) -> None:
    url = serve(max_batch=1, options=[("null.latency_ms", "10"), *SLEEPY])
    target = prepare_target(url)
    single = run_once(target, RunSettings("single-stream", 0.5, warmup_s=0.1))
    assert single.issued == single.ok > 0 and min(single.latencies_ms) >= 10.0
    assert single.ok <= 0.5 / 0.010 + 1  # one in flight: at most duration / service time
    failing = prepare_target(serve(options=[("null.fail", "run")]))
    with pytest.raises(Exception, match="every warm-up request"):
        run_once(failing, RunSettings("offline", 0.3, concurrency=2))
    run = run_once(failing, RunSettings("offline", 0.3, concurrency=2, warmup_s=0))
    assert run.ok == 0 and run.errors["http_500"] == run.issued
    summary = summarize(run, None)
    assert not summary.valid and "no request succeeded" in summary.reasons


def test_load_command_writes_a_results_file(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    result = run_cli(
        "load", "tiny_cnn", "-b", "null", "-O", "null.latency_ms=2", "--scenario", "offline",
        "--concurrency", "4", "--duration", "1", "--slo-p99-ms", "500", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "offline x4" in result.stdout
    case = read_results(out).cases[0]
    assert case.status == "ok" and case.latency_ms is not None
    assert case.timing.samples_ms and case.timing.throughput == pytest.approx(case.extra["load"]["achieved_qps"])
    assert case.extra["load"]["scenario"] == "offline" and case.extra["load"]["errors"] == {}
    assert case.backend == "null"
    bad = run_cli("load", "tiny_cnn", "-b", "null", "--scenario", "server")
    assert bad.returncode == 2 and "needs --qps" in bad.stderr
    url_with_backend = run_cli("load", "http://127.0.0.1:1", "-b", "null", "--qps", "1")
    assert url_with_backend.returncode == 2 and "--backend is for a MODEL" in url_with_backend.stderr
    levels = run_cli("load", "http://127.0.0.1:1", "--scenario", "offline", "--concurrency", "1,4")
    assert levels.returncode == 2 and "'1,4' is not a valid integer" in levels.stderr  # levels are `llm load`'s
    zero = run_cli("load", "http://127.0.0.1:1", "--scenario", "offline", "--concurrency", "0")
    assert zero.returncode == 2 and "--concurrency 0 must be positive" in zero.stderr


def test_load_command_over_grpc(tmp_path: Path) -> None:
    """`load MODEL --protocol grpc` serves MODEL with --grpc-port and loads it through KServe v2 gRPC."""
    out = tmp_path / "load.json"
    result = run_cli(
        "load", "tiny_cnn", "-b", "null", "--protocol", "grpc", "--scenario", "offline",
        "--concurrency", "2", "--duration", "0.5", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "grpc://127.0.0.1:" in result.stdout
    case = read_results(out).cases[0]
    assert case.backend == "null" and case.extra["load"]["errors"] == {} and case.timing.samples_ms
    wrong = run_cli("load", "http://127.0.0.1:1", "--protocol", "grpc", "--scenario", "offline")
    assert wrong.returncode == 2 and "grpc://HOST:PORT" in wrong.stderr
    json_grpc = run_cli("load", "grpc://127.0.0.1:1", "--json", "--scenario", "offline")
    assert json_grpc.returncode == 2 and "--json is for HTTP targets" in json_grpc.stderr


def test_results_round_trip_keeps_load_fields(tmp_path: Path, serve: Any) -> None:
    from infermeter.load.verdict import case_result
    from infermeter.results.io import write_results
    from infermeter.results.schema import ResultsFile

    target = prepare_target(serve(options=[("null.latency_ms", "1")]))
    summary = summarize(run_once(target, RunSettings("offline", 0.3, concurrency=2, warmup_s=0)), None)
    case = case_result(summary, "tiny_cnn", "null", None, "fp32", "fp32", {}, "now", target.base_url)
    path = tmp_path / "r.json"
    write_results(path, ResultsFile(created="now", environment={}, cases=[case]))
    loaded = read_results(path).cases[0]
    assert loaded.extra["load"] == json.loads(json.dumps(case.extra["load"]))
    assert loaded.id == case.id
