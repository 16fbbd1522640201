"""One peak search for both protocols: bisection on measured rates, with the interval where the SLO stops holding;
`llm load --find-peak` against a fake server that queues (one slot), and its bad flags refused with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAIServer
from serve_helpers import run_cli

from infermeter.load.peak import bisect_peak


def test_bisection_brackets_the_rate_where_the_slo_stops_holding() -> None:
    search = bisect_peak(lambda rate: rate <= 10.0, high=40.0, max_probes=10, tolerance=0.05)
    assert search.held_at is not None and search.failed_at is not None
    assert search.held_at <= 10.0 < search.failed_at
    assert (search.failed_at - search.held_at) / search.failed_at <= 0.05
    assert [rate for rate, _ in search.probes[:3]] == [40.0, 20.0, 10.0]  # halving until it holds
    assert "stops holding between" in search.line("QPS")
    always = bisect_peak(lambda rate: True, high=8.0)
    assert always.probes == ((8.0, True),) and "probe higher" in always.line("QPS")
    never = bisect_peak(lambda rate: False, high=8.0, min_rate=1.0)
    assert never.held_at is None and [r for r, _ in never.probes] == [8.0, 4.0, 2.0, 1.0]
    assert "no rate met the SLO" in never.line("QPS")


def test_llm_load_finds_the_peak_rate_under_the_slo(tmp_path: Path) -> None:
    out = tmp_path / "peak.json"
    # One slot, 0.2 s a stream: past ~5 requests/s the queue grows and end-to-end times pass 600 ms.
    with FakeOpenAIServer(["ok"], tokens=4, delay_s=0.05, slots=1) as server:
        result = run_cli(
            "llm", "load", server.url, "--find-peak", "--rates", "16", "--requests", "8", "--gen-len", "4",
            "--slo", "latency_ms=600", "-o", str(out),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    cases = json.loads(out.read_text())["cases"]
    rates = [case["serving"]["level"] for case in cases]
    assert rates[0] == 16 and len(rates) >= 3 and all(r < 16 for r in rates[1:])
    assert cases[0]["serving"]["slo_attainment"] < 0.9  # 16/s against 5/s of capacity: the SLO fails
    assert "stops holding between" in result.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--find-peak", "--rates", "1,2", "--slo", "latency_ms=5"), "starts from one rate"),
        (("--find-peak", "--slo", "latency_ms=5"), "starts from one rate"),
        (("--find-peak", "--rates", "4"), "--find-peak needs an SLO"),
    ],
)
def test_llm_find_peak_flags_are_checked(args: tuple[str, ...], said: str) -> None:
    result = run_cli("llm", "load", "http://127.0.0.1:1", *args)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr


def test_kserve_find_peak_says_how_sure_it_is(tmp_path: Path) -> None:
    out = tmp_path / "peak.json"
    result = run_cli(
        "load", "tiny_cnn", "-b", "null", "--find-peak", "--slo-p99-ms", "1000", "--duration", "1",
        "--slo", "latency_ms=1000", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    # Whatever this machine's capacity, the search ends with one of its three sentences.
    assert any(s in said for s in ("the SLO stops holding between", "probe higher", "no rate met the SLO")), said
    cases = json.loads(out.read_text())["cases"]
    assert cases[0]["load"]["scenario"] == "offline" and len(cases) >= 2  # the capacity run, then the probes
    assert all(case["load"]["goodput_qps"] is not None for case in cases)
