"""advise's side of the cost–performance–memory triangle on crafted results: `--price-per-hour` gives every case
its cost per million inferences, the pick under `--memory-budget` says what it traded, and bad prices are usage
errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli
from crafted_results import make_case, make_results
from infermeter.advise.pick import Constraints, advise
from infermeter.advise.tradeoff import cost_per_million, format_cost
from infermeter.core.errors import UsageError
from infermeter.core.validation import check_price_per_hour
from infermeter.results.io import write_results


def _cases() -> list:
    return [
        make_case("onnxruntime", p50_ms=2.0, peak_mb=180.0),
        make_case("openvino", p50_ms=1.0, peak_mb=900.0, seed=1),  # fastest, over a 512 MB budget
        make_case("torch", 8, p50_ms=6.0, peak_mb=300.0, seed=2),  # slowest per request, cheapest per inference
    ]


def test_cost_per_million_is_the_price_over_the_inferences_in_an_hour() -> None:
    assert cost_per_million(3.6, 1000.0) == pytest.approx(1.0)  # 3.6 M inferences an hour cost 3.6
    assert cost_per_million(2.0, 500.0) == pytest.approx(2.0 / (500.0 * 3600) * 1e6)
    assert cost_per_million(2.0, None) is None and cost_per_million(2.0, 0.0) is None


def test_every_case_gets_its_cost_and_the_trade_is_stated() -> None:
    cases = _cases()
    advice = advise(cases, Constraints(max_memory_mb=512.0), "latency", price_per_hour=2.0)
    assert advice.pick is not None and advice.pick.backend == "onnxruntime"
    for case in cases:
        assert advice.cost_of(case) == pytest.approx(cost_per_million(2.0, case.timing.throughput))
    text = "\n".join(advice.explanation)
    ort, ov, torch = cases
    assert ov.latency_ms is not None and ort.latency_ms is not None
    ratio = ort.latency_ms.p50 / ov.latency_ms.p50
    assert f"Traded: picked tiny_cnn onnxruntime fp32 b1 static, {ratio:.2f}x slower" in text
    assert "has peak memory 900 MB, over the 512 MB limit (--max-memory-mb)" in text
    assert (
        f"costs {format_cost(advice.cost_of(ort))} per million inferences vs {format_cost(advice.cost_of(ov))}" in text
    )
    # The batch-8 torch case within the budget is cheaper per inference: said, with the ratio.
    cheapest = "cheapest candidate within the constraints is tiny_cnn torch fp32 b8 static at "
    assert cheapest + format_cost(advice.cost_of(torch)) in text
    # Without a price: no cost anywhere, the trade still stated.
    plain = advise(cases, Constraints(max_memory_mb=512.0))
    assert plain.costs == () and plain.cost_of(ort) is None
    assert any(line.startswith("Traded:") for line in plain.explanation)
    assert not any("per million" in line for line in plain.explanation)


def test_no_trade_line_when_the_pick_is_the_best_measured() -> None:
    advice = advise(_cases(), Constraints(), "latency", price_per_hour=1.0)
    assert advice.pick is not None and advice.pick.backend == "openvino"
    assert not any(line.startswith("Traded:") for line in advice.explanation)


def test_cli_shows_costs_and_drops_cases_over_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    cases = _cases()
    write_results(path, make_results(cases))
    proc = run_cli("advise", str(path), "--memory-budget", "512MB", "--price-per-hour", "2")
    assert proc.returncode == 0, proc.stderr
    assert "cost per million (2/h)" in proc.stdout
    for case in cases:
        assert format_cost(cost_per_million(2.0, case.timing.throughput)) in proc.stdout
    excluded = proc.stdout.split("excluded")[-1]
    assert "openvino" in excluded and "breaks --max-memory-mb 512" in excluded and "per million" in excluded
    assert "Traded: picked" in proc.stdout


@pytest.mark.parametrize("price", ["0", "-1", "nan", "inf"])
def test_bad_prices_are_usage_errors(tmp_path: Path, price: str) -> None:
    path = tmp_path / "r.json"
    write_results(path, make_results(_cases()))
    proc = run_cli("advise", str(path), f"--price-per-hour={price}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--price-per-hour" in proc.stderr and "must be a positive price" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_price_check_accepts_none_and_positive() -> None:
    check_price_per_hour(None)
    check_price_per_hour(0.01)
    with pytest.raises(UsageError, match="price_per_hour"):
        check_price_per_hour(-2.0, "price_per_hour")
