"""`--memory-budget` (advise, optimize): the target device's memory; a candidate whose measured peak exceeds it is
dropped with the reason, and so is a case that was killed for memory (`oom`)."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_cli
from crafted_results import make_case, make_results
from infermeter.results.io import write_results


def test_advise_drops_candidates_over_the_memory_budget_and_oom_cases_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    cases = [
        make_case("onnxruntime", p50_ms=2.0, peak_mb=180.0),
        make_case("openvino", p50_ms=1.0, peak_mb=400.0),
        make_case("torch", status="oom", peak_mb=700.0, error="exceeded --memory-limit 512 MB", p50_ms=1.0),
    ]
    write_results(path, make_results(cases))
    proc = run_cli("advise", str(path), "--memory-budget", "0.25GB")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pick = proc.stdout.split("excluded")[0]
    assert "onnxruntime" in pick and "openvino" in proc.stdout.split("excluded")[1]
    assert "breaks --max-memory-mb 256" in proc.stdout
    assert "oom" in proc.stdout.split("excluded")[1]
    # Without the budget the faster, bigger engine wins.
    proc = run_cli("advise", str(path))
    assert proc.stdout.split("excluded")[0].index("openvino") < proc.stdout.split("excluded")[0].index("onnxruntime")


def test_memory_budget_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_results(path, make_results([make_case("onnxruntime")]))
    proc = run_cli("advise", str(path), "--memory-budget", "100MB", "--max-memory-mb", "200")
    assert proc.returncode == 2 and "disagree" in proc.stderr
    proc = run_cli("optimize", "tiny_cnn", "--memory-budget", "much")
    assert proc.returncode == 2 and "memory size" in proc.stderr
