"""optimize's constraints from the cost–performance–memory triangle, on the null backend (and the torch baseline
every run of a PyTorch model measures): `--memory-budget` drops candidates with the reason shown, `--price-per-hour`
gives every measured case its cost per million inferences in the output, the journal (the report's story) and
deploy.json; bad values are usage errors before anything is measured."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import advised_case, load_json, run_cli
from infermeter.advise.tradeoff import cost_per_million, format_cost

# Short measurements (the finalists' group: 3x --min-time each, in bursts of --min-time / --rounds), and null's
# simulated tuning at 1 ms per trial instead of 10 ms (the tuning step is tests/optimize/test_tuning_step.py's).
QUICK = ["--iterations", "10", "--min-time", "0.05", "--warmup", "1", "--max-time", "1", "--rounds", "2"]
QUICK += ["--threads", "1", "--target-ci", "0", "-b", "null", "-O", "null.trial_s=0.001"]


def _advise_details(folder: Path) -> dict[str, Any]:
    journal = load_json(folder / "results.json")["optimize"]
    details: dict[str, Any] = next(s for s in journal["steps"] if s["key"] == "advise")["details"]
    return details


@pytest.fixture(scope="module")
def over_budget(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A 1 MB budget nothing fits, priced at 2 per hour."""
    folder = tmp_path_factory.mktemp("triangle") / "out"
    args = ["optimize", "tiny_cnn", "-o", str(folder), "--memory-budget", "1MB", "--price-per-hour", "2", *QUICK]
    return folder, run_cli(*args, timeout=400)


@pytest.mark.slow
def test_memory_budget_drops_every_case_over_it_with_the_reason(
    over_budget: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, proc = over_budget
    assert proc.returncode == 3, proc.stderr[-3000:]
    cases = {c["id"]: c for c in load_json(folder / "results.json")["cases"]}
    real = [c for c in cases.values() if c["status"] == "ok" and not c.get("synthetic")]
    assert real  # the torch baseline, at least
    for case in real:
        peak_mb = case["memory"]["peak_rss_mb"]
        assert peak_mb > 1
        assert f"its peak memory {peak_mb:,.4g} MB breaks --max-memory-mb 1" in proc.stdout
    assert "--max-memory-mb 1 is binding" in proc.stdout
    excluded = {e["case"] for e in _advise_details(folder)["excluded"]}
    assert all(any(c["backend"] in label for label in excluded) for c in real)


@pytest.mark.slow
def test_price_gives_every_case_its_cost(over_budget: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    folder, proc = over_budget
    details = _advise_details(folder)
    assert details["price_per_hour"] == 2.0
    cases = {c["id"]: c for c in load_json(folder / "results.json")["cases"]}
    ok = [c for c in cases.values() if c["status"] == "ok"]
    priced = {c["case_id"] for c in details["costs"]}
    assert priced and priced <= {c["id"] for c in ok}
    # Every ok case is priced but those the advise step left out as candidates (reduced precision without
    # accuracy evidence), each with its reason in the journal.
    journal = load_json(folder / "results.json")["optimize"]
    skipped = next(s for s in journal["steps"] if s["key"] == "advise")["skipped"]
    for case in ok:
        if case["id"] not in priced:
            assert case["precision"] != "fp32"
            assert any("without accuracy evidence" in s["reason"] and case["backend"] in s["what"] for s in skipped)
    for cost in details["costs"]:
        expected = cost_per_million(2.0, cases[cost["case_id"]]["timing"]["throughput"])
        assert cost["cost_per_million"] == pytest.approx(expected)
        assert f"(cost {format_cost(expected)} per million)" in proc.stdout  # every excluded case, priced


@pytest.mark.slow
def test_a_budget_that_fits_resumes_and_prices_the_pick(
    over_budget: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    folder, _ = over_budget
    args = ["optimize", "tiny_cnn", "-o", str(folder), "--memory-budget", "64GB", "--price-per-hour", "2", *QUICK]
    proc = run_cli(*args, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = load_json(folder / "deploy.json")
    pick = advised_case(folder, manifest["chosen"]["case_id"])  # a finalist: the figures measured with the others
    expected = cost_per_million(2.0, pick["timing"]["throughput"])
    assert manifest["price_per_hour"] == 2.0 and manifest["chosen"]["cost_per_million"] == pytest.approx(expected)
    assert f"Cost: {format_cost(expected)} per million inferences at 2 per hour" in proc.stdout
    assert "cost per million (2/h)" in proc.stdout
    assert f"Cost: {format_cost(expected)} per million" in (folder / "report.html").read_text()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--price-per-hour", "0"], "must be a positive price"),
        (["--price-per-hour", "-3"], "must be a positive price"),
        (["--serve"], "--serve needs --slo-p99-ms"),
        (["--slo-p99-ms", "-5"], "--slo-p99-ms -5 must be positive"),
        (["--slo-p99-ms", "50", "--serve-max-batch", "0"], "--serve-max-batch 0 must be positive"),
        (["--slo-p99-ms", "50", "--serve-max-delay-ms", "soon"], "--serve-max-delay-ms 'soon' is not a number"),
    ],
)
def test_bad_values_exit_2_before_measuring(tmp_path: Path, flags: list[str], message: str) -> None:
    folder = tmp_path / "out"
    proc = run_cli("optimize", "tiny_cnn", "-o", str(folder), "-b", "null", *flags)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not (folder / "results.json").exists()
