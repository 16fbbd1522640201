"""The serving sweep against the tiny OpenAI-compatible server on 127.0.0.1 (tests/llm/fake_openai.py): its
bookkeeping, the knee and the SLO verdict, the server's metrics read while it runs, and bad input (a server that
dies mid-sweep, streams nothing, sends a malformed SSE line, or does not know the model), one line per level."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer

from cli_helpers import load_json, run_cli
from crafted_results import make_case
from crafted_results import serving_level_case as _level
from infermeter.core.errors import UsageError
from infermeter.llm.generation_metrics import SLO
from infermeter.llm.openai_bench import EndpointSettings
from infermeter.llm.server_metrics import parse_prometheus, parse_slots
from infermeter.llm.serving_sweep import SweepSettings, run_sweep
from infermeter.llm.serving_verdict import find_knee, level_points, verdicts
from infermeter.load.levels import doubling_levels
from infermeter.results.records import (
    ServerMetrics,
    ServingLevel,
    read_record,
    write_record,
)
from infermeter.results.schema import CaseResult


def _sweep(url: str, levels: tuple[float, ...], mode: str = "concurrency", **endpoint: object) -> SweepSettings:
    settings = EndpointSettings(url, **{"gen_len": 4, "requests": 8, "request_timeout_s": 5.0, **endpoint})  # type: ignore[arg-type]
    return SweepSettings(settings, mode, levels=levels)


def test_doubling_levels_end_at_the_top() -> None:
    assert doubling_levels(1) == (1,)
    assert doubling_levels(16) == (1, 2, 4, 8, 16)
    assert doubling_levels(6) == (1, 2, 4, 6)
    with pytest.raises(UsageError):
        doubling_levels(0)


def test_concurrency_sweep_finds_the_knee_at_the_servers_slots() -> None:
    # Two slots and 400 ms per stream: 1 → 2 clients doubles throughput; past 2 clients requests queue. 2 → 4
    # may still gain a little (the queue hides each client's own gap between requests), 4 → 8 cannot.
    with FakeOpenAIServer(["ok"], tokens=4, delay_s=0.1, slots=2) as server:
        slo = SLO(ttft_ms=350.0)
        settings = _sweep(server.url, (1, 2, 4, 8), slo=slo)
        # 60%: a few slow requests at level 1 on a loaded machine must not fail it; at level 4 every request
        # after the first two waits a whole stream, so about 25% meet the SLO.
        cases = run_sweep(SweepSettings(settings.endpoint, levels=settings.levels, slo_target=0.6))
    levels = [read_record(case, ServingLevel) for case in cases]
    assert [level.level for level in levels if level] == [1, 2, 4, 8]
    assert all(case.status == "ok" for case in cases)
    assert len({case.id for case in cases}) == 4
    (verdict,) = verdicts(cases)
    tput = [p.tokens_per_s or 0.0 for p in verdict.points]
    # Timing on a shared machine: the saturated levels are compared with a 25% margin here (the exact 10% rule
    # is checked on crafted levels below).
    assert tput[1] > 1.5 * tput[0] and tput[3] < 1.25 * tput[2]
    assert find_knee(verdict.points, min_gain=0.25) in (2, 4)
    # At 4 clients most requests wait a whole stream (~400 ms) for a slot: TTFT beyond 350 ms, the SLO fails.
    assert levels[0] and levels[0].slo_held and levels[2] and not levels[2].slo_held
    assert verdict.max_under_slo == 2
    said = f"knee at concurrency {verdict.knee:g}" if verdict.knee else "no knee up to concurrency 8"
    assert verdict.lines()[0] == f"{verdict.series}: {said}" or said.startswith("no knee")


def test_knee_is_the_last_level_worth_going_to() -> None:
    # 100 → 190 (+90%) → 200 (+5%, latency up): the knee is 2. A later bigger gain does not move it.
    cases = [
        _level(1, 100, 10),
        _level(2, 190, 11),
        _level(4, 200, 20),
        _level(8, 400, 21),
    ]
    assert find_knee(level_points(cases)[("s", "concurrency")]) == 2
    # +5% with latency falling is not a knee (noise, not queueing); still growing ≥ 10% everywhere: no knee.
    assert find_knee(level_points([_level(1, 100, 10), _level(2, 105, 9)])[("s", "concurrency")]) is None
    assert find_knee(level_points([_level(1, 100, 10), _level(2, 111, 30)])[("s", "concurrency")]) is None
    # A failed level (no throughput) is skipped, its neighbours compared.
    failed = make_case("openai-endpoint", 1, 1.0, n=1, status="failed")
    write_record(failed, ServingLevel("s", "concurrency", 2, failure="all 4 requests failed: connect"))
    points = level_points([_level(1, 100, 10), failed, _level(4, 104, 40)])[("s", "concurrency")]
    assert [p.level.level for p in points] == [1, 2, 4] and find_knee(points) == 1


def test_rate_sweep_sends_poisson_arrivals_and_judges_the_slo() -> None:
    with FakeOpenAIServer(["ok"], tokens=3) as server:
        cases = run_sweep(_sweep(server.url, (20.0, 40.0), mode="rate", requests=10, slo=SLO(ttft_ms=5_000)))
        sent = len(server.bodies)
    assert sent == 20
    assert [case.options["request_rate_per_s"] for case in cases] == ["20", "40"]
    assert all("concurrency" not in case.extra for case in cases)
    (verdict,) = verdicts(cases)
    assert verdict.mode == "rate" and verdict.knee is None and verdict.max_under_slo == 40
    assert cases[0].id != cases[1].id


def test_server_metrics_are_sampled_while_each_level_runs() -> None:
    with FakeOpenAIServer(["ok"], tokens=6, delay_s=0.05, slots=1) as server:
        settings = _sweep(server.url, (2,), requests=4)
        settings = SweepSettings(
            settings.endpoint, "concurrency", levels=(2,), series="fake", server_metrics=True, metrics_interval_s=0.05
        )
        (case,) = run_sweep(settings)
    record = read_record(case, ServerMetrics)
    assert record is not None and len(record.samples) >= 3, record
    assert record.sources[0].endswith("/metrics") and not record.unavailable, record.unavailable
    processing = [s.values["llamacpp:requests_processing"] for s in record.samples]
    deferred = [s.values["llamacpp:requests_deferred"] for s in record.samples]
    assert max(processing) == 1 and max(deferred) >= 1, record  # one slot: the second client waited
    assert max(s.values["slots:busy"] for s in record.samples) == 1
    assert all(s.values["slots:total"] == 1 for s in record.samples)
    times = [s.t_s for s in record.samples]
    assert times == sorted(times) and times[0] >= 0
    assert "vllm:e2e_request_latency_seconds_count" not in record.names()  # histograms are left out


def test_prometheus_text_is_parsed_with_label_sets_summed() -> None:
    text = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="a"} 3\n'
        'vllm:num_requests_running{model_name="b"} 2\n'
        "# TYPE vllm:num_preemptions counter\n"
        "vllm:num_preemptions_total 7\n"
        "vllm:num_preemptions_created 1.7e9\n"
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 4\n'
        "vllm:time_to_first_token_seconds_count 4\n"
        "# TYPE python_gc_objects_collected counter\n"
        "python_gc_objects_collected_total 12\n"
    )
    assert parse_prometheus(text) == {"vllm:num_requests_running": 5.0, "vllm:num_preemptions_total": 7.0}
    assert parse_slots([{"state": 1}, {"state": 0}, {"is_processing": True}]) == {"slots:busy": 2.0, "slots:total": 3.0}
    with pytest.raises(ValueError):
        parse_slots({"error": "slots disabled"})


def test_a_server_without_metrics_endpoints_is_noted_not_fatal() -> None:
    with FakeOpenAIServer(["ok"]) as server:
        settings = _sweep(server.url + "/nothing-here", (1,), requests=2)
        settings = SweepSettings(settings.endpoint, server_metrics=True, levels=(1,), metrics_interval_s=0.05)
        (case,) = run_sweep(settings)
    record = read_record(case, ServerMetrics)
    assert case.status == "ok"  # the requests went through: only the metrics were missing
    assert record is not None and not record.samples
    assert any("HTTP 404" in reason for reason in record.unavailable)


def _failure(case: CaseResult) -> str:
    level = read_record(case, ServingLevel)
    assert level is not None and level.failure is not None
    assert "\n" not in level.failure
    return level.failure


def test_server_down_mid_sweep_keeps_the_levels_measured(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    with FakeOpenAIServer(["ok"], max_requests=4) as server:
        proc = run_cli(
            "llm", "load", server.url, "--scenario", "sweep", "--concurrency", "4", "--requests", "4",
            "--timeout", "5", "-o", str(out),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [c["serving"]["level"] for c in cases] == [1, 2, 4]
    assert cases[0]["status"] == "ok" and cases[0]["generate"]["succeeded"] == 4
    for case in cases[1:]:
        assert case["status"] == "failed"
        # Refused, or (when a request raced the shutdown) accepted and then cut: either way one line that says so.
        assert re.match(r"all 4 requests failed: (connect|stream_dropped) \(", case["error"]), case["error"]
    assert proc.stderr.count("requests failed:") == 2  # one line per failed level
    assert "no knee up to concurrency 4" in proc.stdout


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (["empty"], "all 2 requests failed: no_output (the stream finished without any output token)"),
        (["garbage"], "all 2 requests failed: bad_payload (a chunk was not valid JSON): {not json"),
        (["ok", "garbage"], "1 of 2 requests failed: bad_payload"),
    ],
)
def test_bad_streams_give_one_line_per_level(script: list[str], expected: str) -> None:
    with FakeOpenAIServer(script) as server:
        cases = run_sweep(_sweep(server.url, (1, 2), requests=2))
    assert len(cases) == 2
    for case in cases:
        assert _failure(case).startswith(expected)
    assert cases[0].status == ("ok" if script[0] == "ok" else "failed")


def test_wrong_model_name_says_what_the_server_said(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with FakeOpenAIServer(["ok"], model="tiny") as server:
        proc = run_cli(
            "llm", "load", server.url, "--model-name", "nope", "--concurrency", "1,2",
            "--requests", "2", "-o", str(out),
        )  # fmt: skip
        good = run_sweep(_sweep(server.url, (1,), requests=2, model="tiny"))
    assert proc.returncode == 1  # nothing succeeded
    cases = load_json(out)["cases"]
    assert len(cases) == 2
    for case in cases:
        assert case["error"] == (
            "all 2 requests failed: http_404 (the server answered with a non-200 status): The model `nope` does "
            "not exist."
        )
    assert "Traceback" not in proc.stderr
    assert good[0].status == "ok"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--rates", "1,x"), "--rates 'x' is not a number"),
        (("--concurrency", "1,x"), "--concurrency 'x' is not an integer"),
    ],
)
def test_sweep_levels_are_checked(flags: tuple[str, ...], said: str) -> None:
    """(--rates with --concurrency: tests/llm/test_llm_group.py; --rates 0: tests/load/test_goodput.py.)"""
    proc = run_cli("llm", "load", "http://127.0.0.1:1", *flags)
    assert proc.returncode == 2 and said in proc.stderr
