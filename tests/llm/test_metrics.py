"""Generation metric definitions against known token timings (exact), and the fake backend through the runner."""

from __future__ import annotations

import math

import pytest

from infermeter.llm.backends.base import GenerateCase
from infermeter.llm.generation_metrics import SLO, RequestTiming, request_metrics, summarize
from infermeter.llm.runner import execute_generate_case, run_generate_isolated
from infermeter.results.schema import case_from_dict, case_to_dict


def timing(start: float, ttft: float, gaps: list[float], tail: float = 0.0, **kw: object) -> RequestTiming:
    times = [start + ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestTiming(start_s=start, end_s=times[-1] + tail, token_times_s=tuple(times), **kw)  # type: ignore[arg-type]


def test_request_metrics_follow_the_definitions() -> None:
    # 5 tokens: first at 0.100 s, then every 0.020 s, stream ends 0.010 s after the last token.
    metrics = request_metrics(timing(1.0, 0.100, [0.020] * 4, tail=0.010, prompt_tokens=7))
    assert metrics.ttft_ms == pytest.approx(100.0)
    assert metrics.e2e_ms == pytest.approx(190.0)
    assert metrics.tpot_ms == pytest.approx((190.0 - 100.0) / 4)
    assert metrics.itl_ms == pytest.approx((20.0,) * 4)
    assert metrics.tokens_per_s == pytest.approx(5 / 0.190)
    assert metrics.decode_tokens_per_s == pytest.approx(1 / 0.0225)
    assert metrics.output_tokens == 5 and metrics.prompt_tokens == 7


def test_one_token_has_no_tpot_and_reported_usage_overrides_chunk_count() -> None:
    single = request_metrics(timing(0.0, 0.05, []))
    assert single.tpot_ms is None and single.decode_tokens_per_s is None
    # Two chunks carrying 6 tokens in all (server-reported usage): TPOT counts tokens, not chunks.
    chunked = request_metrics(timing(0.0, 0.1, [0.1], reported_output_tokens=6))
    assert chunked.output_tokens == 6
    assert chunked.tpot_ms == pytest.approx(100.0 / 5)
    assert chunked.itl_ms == pytest.approx((100.0,))


def test_failed_request_has_no_metrics() -> None:
    with pytest.raises(ValueError):
        request_metrics(RequestTiming(0.0, 1.0, error_kind="stream_dropped"))


def test_summary_aggregates_errors_goodput_and_wall_time() -> None:
    fast = timing(0.0, 0.05, [0.01] * 9)  # TTFT 50 ms, TPOT 10 ms, ends at 0.14 s
    slow = timing(0.5, 0.30, [0.01] * 9)  # TTFT 300 ms: misses the SLO, ends at 0.89 s
    dropped = RequestTiming(0.2, 0.4, token_times_s=(0.25,), error_kind="stream_dropped")
    refused = RequestTiming(0.3, 0.31, error_kind="http_503")
    summary = summarize([fast, slow, dropped, refused], SLO(ttft_ms=100.0, tpot_ms=20.0))
    assert summary.requests == 4 and summary.succeeded == 2 and summary.failed == 2
    assert summary.errors_by_kind == {"http_503": 1, "stream_dropped": 1}
    assert summary.wall_s == pytest.approx(0.89)
    assert summary.output_tokens == 20
    assert summary.output_tokens_per_s == pytest.approx(20 / 0.89)
    assert summary.requests_per_s == pytest.approx(2 / 0.89)
    assert summary.slo_met == 1 and summary.goodput_rps == pytest.approx(1 / 0.89)
    assert summary.ttft_ms is not None and summary.ttft_ms.p50 == pytest.approx(175.0)
    assert summary.ttft_ms.max == pytest.approx(300.0)
    assert summary.tpot_ms is not None and summary.tpot_ms.p99 == pytest.approx(10.0)
    assert summary.itl_ms is not None and summary.itl_ms.count == 18


def test_empty_summary() -> None:
    summary = summarize([])
    assert summary.requests == 0 and summary.ttft_ms is None and summary.output_tokens_per_s == 0.0


def fake_case(**kw: object) -> GenerateCase:
    base: dict[str, object] = {
        "model": "fake",
        "backend": "fake",
        "prompt_len": 8,
        "gen_len": 11,
        "requests": 4,
        "warmup": 1,
        "options": (("fake.decode_ms", "5"), ("fake.prefill_ms", "40")),
    }
    base.update(kw)
    return GenerateCase(**base)  # type: ignore[arg-type]


def test_fake_backend_gives_exact_ttft_tpot_and_tokens_per_s() -> None:
    result = execute_generate_case(fake_case())
    assert result.status == "ok", result.error
    gen = result.extra["generate"]
    assert gen["requests"] == 4 and gen["succeeded"] == 4
    assert gen["ttft_ms"]["p50"] == pytest.approx(40.0) and gen["ttft_ms"]["p99"] == pytest.approx(40.0)
    assert gen["tpot_ms"]["p50"] == pytest.approx(5.0) and gen["tpot_ms"]["p99"] == pytest.approx(5.0)
    e2e_ms = 40.0 + 10 * 5.0
    assert gen["e2e_ms"]["p50"] == pytest.approx(e2e_ms)
    assert gen["tokens_per_s_per_request"]["p50"] == pytest.approx(11 / (e2e_ms / 1e3))
    # Requests run back to back on the fake clock: aggregate = 44 tokens over 4 × 90 ms.
    assert gen["output_tokens_per_s"] == pytest.approx(44 / (4 * e2e_ms / 1e3))
    assert result.timing.throughput == pytest.approx(gen["output_tokens_per_s"])
    assert result.timing.samples_ms == pytest.approx([e2e_ms] * 4)
    assert result.loading.first_inference_ms == pytest.approx(e2e_ms)
    assert result.extra["prompt_len"] == 8 and result.extra["gen_len"] == 11
    # A round trip through the results schema keeps the generation fields.
    again = case_from_dict(case_to_dict(result))
    assert again.extra["generate"]["tpot_ms"]["p50"] == pytest.approx(5.0)


def test_batched_fake_counts_every_sequence() -> None:
    result = execute_generate_case(fake_case(batch=3, requests=2))
    gen = result.extra["generate"]
    assert gen["requests"] == 6 and gen["output_tokens"] == 66
    assert len(result.timing.samples_ms) == 2  # one latency sample per batched request
    assert gen["output_tokens_per_s"] == pytest.approx(66 / (2 * 0.090))


def test_slo_goodput_through_the_runner() -> None:
    passing = execute_generate_case(fake_case(), SLO(ttft_ms=50.0, tpot_ms=5.5))
    failing = execute_generate_case(fake_case(), SLO(ttft_ms=39.0))
    assert passing.extra["generate"]["slo_met"] == 4
    assert failing.extra["generate"]["slo_met"] == 0 and failing.extra["generate"]["goodput_rps"] == 0.0


def test_unavailable_and_unsupported_cases_say_why() -> None:
    unknown_batch = execute_generate_case(fake_case(backend="llama-cpp", batch=2))
    assert unknown_batch.status == "unavailable"
    assert "one sequence at a time" in (unknown_batch.error or "") or "not installed" in (unknown_batch.error or "")
    for backend in ("vllm", "tensorrt-llm"):
        result = execute_generate_case(fake_case(backend=backend))
        assert result.status == "unavailable"
        assert "not installed" in (result.error or "") or "CUDA" in (result.error or "")


def test_isolated_worker_returns_the_same_metrics() -> None:
    result = run_generate_isolated(fake_case(requests=2))
    assert result.status == "ok", result.error
    assert result.isolated and result.memory.peak_rss_mb and result.memory.peak_rss_mb > 0
    assert result.extra["generate"]["tpot_ms"]["p50"] == pytest.approx(5.0)
    assert not math.isnan(result.loading.load_s or math.nan)
