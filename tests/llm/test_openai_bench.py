"""OpenAI streaming levels (the one load generator's closed loop through `openai_client`) against real HTTP servers
on 127.0.0.1 (scripted failures are counted)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer

from cli_helpers import load_json, run_cli
from infermeter.core.errors import UsageError
from infermeter.llm.generation_metrics import SLO
from infermeter.llm.openai_bench import EndpointSettings, make_prompt
from infermeter.llm.serving_sweep import SweepSettings, run_sweep
from infermeter.results.schema import CaseResult


def run_levels(settings: EndpointSettings, *concurrency: int) -> list[CaseResult]:
    """One case per concurrency level, as `llm load --concurrency 1,4` measures them."""
    return run_sweep(SweepSettings(settings, "concurrency", levels=tuple(float(level) for level in concurrency)))


def test_streams_are_timed_and_usage_is_read() -> None:
    with FakeOpenAIServer(["ok"], tokens=6) as server:
        results = run_levels(EndpointSettings(server.url, model="m", prompt_len=12, gen_len=6, requests=8), 1, 4)
        sent = server.bodies
    assert [r.extra["concurrency"] for r in results] == [1, 4]
    for result in results:
        gen = result.extra["generate"]
        assert result.status == "ok" and gen["succeeded"] == 8 and gen["failed"] == 0
        assert gen["output_tokens"] == 48 and gen["prompt_tokens"] == 72  # from the usage chunk
        assert gen["ttft_ms"]["p50"] > 0 and gen["tpot_ms"]["p50"] > 0
        assert gen["itl_ms"]["count"] == 8 * 5
        assert gen["e2e_ms"]["p50"] >= gen["ttft_ms"]["p50"]
        assert result.timing.throughput == pytest.approx(gen["output_tokens_per_s"])
        assert len(result.timing.samples_ms) == 8
    body = sent[0]
    assert body["stream"] is True and body["max_tokens"] == 6 and body["model"] == "m"
    assert len(body["prompt"].split()) == 12
    # No two prompts share a first word, across levels too: a server's prefix cache cannot serve any of them.
    assert len({b["prompt"].split()[0] for b in sent}) == len(sent) == 16


def test_failures_mid_stream_are_counted_by_kind_not_crashed_on() -> None:
    script = ["ok", "drop", "error", "http500", "garbage", "http429"]
    with FakeOpenAIServer(script) as server:
        (result,) = run_levels(EndpointSettings(server.url, requests=12, slo=SLO(ttft_ms=10_000)), 3)
    gen = result.extra["generate"]
    assert gen["requests"] == 12 and gen["succeeded"] == 2
    assert gen["errors_by_kind"] == {
        "bad_payload": 2,
        "http_429": 2,
        "http_500": 2,
        "stream_dropped": 2,
        "stream_error_event": 2,
    }
    assert result.status == "ok" and gen["slo_met"] == 2


def test_streams_shorter_than_asked_are_counted() -> None:
    # 2 tokens of 5 asked, then [DONE] without a finish_reason: cut short without an end-of-sequence.
    with FakeOpenAIServer(["short"]) as server:
        (result,) = run_levels(EndpointSettings(server.url, gen_len=5, requests=4), 2)
    assert result.status == "short_outputs" and result.extra["short_outputs"] == 4
    assert result.error and result.error.startswith("4 of 4 responses came back shorter than the 5 tokens asked (8 ")
    assert result.latency_ms is None and result.timing.throughput is None  # nothing for a comparison to read
    # Streams that stop at an end-of-sequence are only noted, unless --ignore-eos asked for the full length.
    with FakeOpenAIServer(["ok"], tokens=3) as server:
        (eos,) = run_levels(EndpointSettings(server.url, gen_len=5, requests=4), 2)
        (forced,) = run_levels(EndpointSettings(server.url, gen_len=5, requests=4, ignore_eos=True), 2)
    assert eos.status == "ok" and eos.extra["short_outputs"] == 0
    assert any("4 of 4 streams stopped at an end-of-sequence before 5 tokens" in note for note in eos.notes)
    assert forced.status == "short_outputs" and forced.extra["short_outputs"] == 4


def test_unreachable_server_is_a_failed_level_with_connect_errors() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before use: nothing listens there
    (result,) = run_levels(EndpointSettings(f"http://127.0.0.1:{port}", requests=4), 2)
    assert result.status == "failed"
    assert result.extra["generate"]["errors_by_kind"] == {"connect": 4}


def test_bad_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="must start with http"):
        run_levels(EndpointSettings("127.0.0.1:8000"), 1)


def test_prompt_is_made_of_shipped_words() -> None:
    assert len(make_prompt(100, 3).split()) == 100
    assert make_prompt(10, 1) != make_prompt(10, 2)
    tagged = make_prompt(10, 3, "ab12cd34").split()
    assert len(tagged) == 10 and tagged[0] == "ab12cd34-3:" and tagged[1:] == make_prompt(10, 3).split()[1:]


def test_cli_writes_a_results_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with FakeOpenAIServer(["ok", "drop"]) as server:
        proc = run_cli("llm", "load", server.url, "--concurrency", "1,2", "--requests", "4", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    data = load_json(out)
    assert [c["concurrency"] for c in data["cases"]] == [1, 2]
    assert data["cases"][0]["generate"]["errors_by_kind"] == {"stream_dropped": 2}
    assert "TTFT" in proc.stdout
    bad = run_cli("llm", "load", "localhost:1", "--requests", "1")
    assert bad.returncode == 2 and "must start with http" in bad.stderr
