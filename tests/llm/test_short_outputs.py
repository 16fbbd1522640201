"""A level whose answers come back shorter than asked is not `ok`: `short_outputs N of M`, said on the console with
the likely cause, and left out of the knee, the max level under the SLO, the goodput and comparisons."""

from __future__ import annotations

from pathlib import Path

from fake_openai import FakeOpenAIServer

from cli_helpers import load_json, run_cli
from crafted_results import serving_level_case
from infermeter.llm.serving_verdict import find_knee, level_points, max_under_slo
from infermeter.results.schema import CaseResult


def test_a_server_that_truncates_some_streams_gives_short_output_levels(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    # One request in four is cut after 2 of 5 tokens, [DONE] without a finish_reason (llama-cpp-python's interrupt).
    with FakeOpenAIServer(["ok", "ok", "ok", "short"], tokens=5) as server:
        proc = run_cli(
            "llm", "load", server.url, "--concurrency", "1,2", "--requests", "4", "--gen-len", "5",
            "--ignore-eos", "--slo-ttft-ms", "10000", "-o", str(out),
        )  # fmt: skip
    cases = load_json(out)["cases"]
    assert [c["status"] for c in cases] == ["short_outputs", "short_outputs"]
    assert all(c["short_outputs"] == 1 for c in cases)
    assert all(c["latency_ms"] is None and c["timing"]["throughput"] is None for c in cases)  # nothing to compare
    assert cases[0]["error"].startswith("1 of 4 responses came back shorter than the 5 tokens asked (17 tokens of 20)")
    assert "short_outputs 1 of 4" in proc.stdout  # the table's status
    assert "--interrupt_requests False" in proc.stderr  # each level's line says the likely cause
    assert "left out of the verdict" in proc.stdout
    assert "max concurrency under the SLO" in proc.stdout and "none" in proc.stdout
    assert proc.returncode == 1  # no level measured what was asked


def _level(level: int, tokens_per_s: float, e2e_p50_ms: float, status: str = "ok", held: bool = True) -> CaseResult:
    return serving_level_case(level, tokens_per_s, e2e_p50_ms, status, 1.0 if held else 0.0)


def test_short_levels_are_left_out_of_the_knee_and_the_slo_verdict() -> None:
    # Level 2 came back short: its 105 tokens/s (a knee, were it counted) and its SLO miss are not read.
    cases = [
        _level(1, 100, 10),
        _level(2, 105, 20, status="short_outputs", held=False),
        _level(4, 190, 21),
        _level(8, 195, 40),
    ]
    points = level_points(cases)[("s", "concurrency")]
    assert find_knee(points) == 4
    assert max_under_slo(points) == 8
    counted = [_level(1, 100, 10), _level(2, 105, 20, held=False), _level(4, 190, 21)]
    counted_points = level_points(counted)[("s", "concurrency")]
    assert find_knee(counted_points) == 1 and max_under_slo(counted_points) == 1  # the same levels, all `ok`
