"""Goodput under one SLO for KServe `load` as for `llm load` (requests per second within the bound), bad SLO
flags and rates refused with exit 2, and a server's refusals said in one line, counted per run, the run going on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_kserve import MESSAGE, FakeKServe
from serve_helpers import run_cli

from infermeter.core.errors import UsageError
from infermeter.load.generator import LoadRun
from infermeter.load.slo import SloBounds, goodput, parse_slo
from infermeter.load.verdict import summarize


def test_slo_flags_are_parsed_and_checked() -> None:
    assert parse_slo(["latency_ms=50", "ttft-ms=200"]) == SloBounds(latency_ms=50.0, ttft_ms=200.0)
    for bad, said in (
        (["p99=5"], "NAME one of latency_ms"),
        (["latency_ms"], "write NAME=MS"),
        (["latency_ms=0"], "positive"),
        (["latency_ms=-3"], "positive"),
        (["latency_ms=fast"], "not a number"),
        (["latency_ms=1", "latency_ms=2"], "given twice"),
    ):
        with pytest.raises(UsageError, match=said):
            parse_slo(bad)
    with pytest.raises(UsageError, match="a KServe request has one latency"):
        parse_slo(["ttft_ms=100"], stream=False)


def test_goodput_counts_the_requests_within_the_bound() -> None:
    assert goodput([1.0, 5.0, 10.0], 5.0, 2.0) == (2, 1.0)
    run = LoadRun("server", 2.0, target_qps=2.0, latencies_ms=[1.0, 5.0, 10.0, 30.0], issued=4, elapsed_s=2.0)
    summary = summarize(run, None, slo_latency_ms=8.0)
    assert summary.slo_met == 2 and summary.goodput_qps == pytest.approx(1.0)
    assert summarize(run, None).goodput_qps is None  # no bound, no goodput


def test_load_reports_goodput_and_a_servers_refusals_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    with FakeKServe(refuse_every=4) as server:
        result = run_cli(
            "load", server.url, "--scenario", "server", "--qps", "40", "--duration", "1", "--slo", "latency_ms=5000",
            "-o", str(out),
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "goodput QPS" in result.stdout and "within 5000 ms" in result.stdout
    record = json.loads(out.read_text())["cases"][0]["load"]
    refused = record["errors"]["http_400"]
    assert refused >= 0.2 * record["issued"] and record["ok"] == record["issued"] - refused
    assert record["slo_latency_ms"] == 5000 and record["slo_met"] == record["ok"]
    assert record["goodput_qps"] == pytest.approx(record["achieved_qps"])
    line = f"{refused} of {record['issued']} requests failed (http_400 {refused}): HTTP 400: {MESSAGE}"
    assert line in record["reasons"]
    assert line in " ".join(result.stdout.split())  # on the console, one line (rich may wrap it)
    assert record["server_batches"] is None  # a server without the statistics endpoint: the client's figures alone


def test_load_shows_the_servers_own_account_beside_the_clients(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    result = run_cli(
        "load", "tiny_cnn", "-b", "null", "-O", "null.latency_ms=5", "-O", "null.wait=sleep", "--scenario",
        "offline", "--concurrency", "16", "--duration", "1", "-o", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(out.read_text())["cases"][0]["load"]
    rows = sum(int(size) * count for size, count in record["server_batches"].items())
    # Every answered request went through one of the server's batches (the last batch's count may trail its
    # answer by a moment); with 16 in flight and a batch of up to 8, most batches hold several requests.
    assert 0.95 * record["ok"] <= rows <= record["ok"]
    assert sum(record["server_batches"].values()) < record["ok"]
    assert record["server_queue_mean_ms"] is not None and record["server_queue_mean_ms"] >= 0
    assert "server: " in result.stdout and "queue wait mean" in result.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("load", "http://127.0.0.1:1", "--slo", "p99=5"), "NAME one of latency_ms"),
        (("load", "http://127.0.0.1:1", "--slo", "ttft_ms=5"), "a KServe request has one latency"),
        (("load", "http://127.0.0.1:1", "--qps", "0"), "--qps"),
        (("llm", "load", "http://127.0.0.1:1", "--slo", "nope=1"), "NAME one of latency_ms"),
        (("llm", "load", "http://127.0.0.1:1", "--rates", "0"), "--rates"),
        (("llm", "load", "http://127.0.0.1:1", "--rates", "-1"), "--rates"),
    ],
)
def test_bad_slo_names_and_rates_exit_2(args: tuple[str, ...], said: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr


def test_llm_load_takes_the_same_slo_flag(tmp_path: Path) -> None:
    from fake_openai import FakeOpenAIServer

    out = tmp_path / "llm.json"
    with FakeOpenAIServer(["ok"], tokens=4) as server:
        result = run_cli(
            "llm", "load", server.url, "--concurrency", "2", "--requests", "4", "--gen-len", "4",
            "--slo", "latency_ms=10000", "--slo", "tpot_ms=5000", "-o", str(out),
        )  # fmt: skip
        both = run_cli("llm", "load", server.url, "--slo", "ttft_ms=5", "--slo-ttft-ms", "5")
    assert result.returncode == 0, result.stderr
    gen = json.loads(out.read_text())["cases"][0]["generate"]
    assert gen["slo"] == {"ttft_ms": None, "tpot_ms": 5000.0, "e2e_ms": 10000.0}
    assert gen["slo_met"] == 4 and gen["goodput_rps"] > 0
    assert both.returncode == 2 and "set the same bound" in both.stderr
