"""compare --rerun with the null backend: a machine-state shift between the two recorded runs (or during the rerun)
does not fail the gate; a real slowdown of the new side is detected; a side that cannot be rebuilt is said."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli
from crafted_results import make_case, make_results
from infermeter.compare.rerun import load_side, rerun_comparison
from infermeter.core.case import MeasureSettings
from infermeter.results.io import read_results as _read
from infermeter.results.io import write_results
from infermeter.results.schema import CaseResult

# Short: 6 rounds of 0.1 s bursts per case, no precision target (a null case's spread is the timer's).
SETTINGS = MeasureSettings(warmup_iterations=2, min_time_s=0.6, max_time_s=5.0, target_ci=0.0, rounds=6)
FLAGS = ["--rounds", "6", "--min-time", "0.6", "--max-time", "5", "--target-ci", "0"]


def _recorded(p50_ms: float, options: dict[str, str], model: str = "tiny_cnn") -> CaseResult:
    """A case as a past `bench` run recorded it (p50_ms: what the machine gave then)."""
    case = make_case("null", 1, p50_ms, model=model, threads=1, sigma=0.02)
    case.options = dict(options)
    return case


def _write(path: Path, case: CaseResult) -> Path:
    write_results(path, make_results([case]))
    return path


def test_a_machine_shift_between_the_runs_fails_the_file_gate_but_not_the_rerun(tmp_path: Path) -> None:
    # Same configuration twice; the machine was 30% slower when NEW was recorded.
    options = {"null.latency_ms": "1"}
    base = _write(tmp_path / "base.json", _recorded(1.0, options))
    new = _write(tmp_path / "new.json", _recorded(1.3, options))
    files = run_cli("compare", str(base), str(new))
    assert files.returncode == 1 and "unreplicated" in files.stdout  # the files alone cannot tell machine from code
    rerun = run_cli("compare", str(base), str(new), "--rerun", *FLAGS)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "re-measured now" in rerun.stdout and "REGRESSION" not in rerun.stdout
    assert "re-measuring 1/1" in rerun.stderr


def test_a_slowdown_of_the_machine_during_the_rerun_hits_both_sides(tmp_path: Path) -> None:
    slow_file = tmp_path / "slow"
    options = {"null.latency_ms": "1", "null.slow_file": str(slow_file), "null.slow_factor": "1.3"}
    base = _write(tmp_path / "base.json", _recorded(1.0, options))
    new = _write(tmp_path / "new.json", _recorded(1.0, options))
    timer = threading.Timer(1.5, slow_file.touch)  # about halfway through the rounds (loading comes first)
    timer.start()
    try:
        settings = replace(SETTINGS, min_time_s=1.2, rounds=12)
        comparison = rerun_comparison(load_side(base, _read(base)), load_side(new, _read(new)), settings)
    finally:
        timer.cancel()
    assert slow_file.exists()
    (change,) = comparison.changes
    # The round in which the file appears may time one side slow and the other not: one ratio in 12 moves, the
    # geometric mean by at most 1.3 ** (1 / 12) = 1.022, and its spread keeps it from being significant.
    assert change.ratio is not None and change.ratio == pytest.approx(1.0, abs=0.04)
    assert not change.regression and change.replication == "paired rounds"
    assert change.replicates[0] >= 12


def test_a_real_slowdown_of_the_new_side_is_detected(tmp_path: Path) -> None:
    base = _write(tmp_path / "base.json", _recorded(1.0, {"null.latency_ms": "1"}))
    new = _write(tmp_path / "new.json", _recorded(1.0, {"null.latency_ms": "1.2"}))  # recorded on a faster day
    comparison = rerun_comparison(load_side(base, _read(base)), load_side(new, _read(new)), SETTINGS, 0.05)
    (change,) = comparison.changes
    assert change.ratio is not None and change.ratio == pytest.approx(1.2, rel=0.03)
    assert change.ratio_ci95 is not None and change.ratio_ci95[0] > 1.1
    assert change.verdict == "slower" and change.regression
    # Declared acceptable: a change within --same-within 25% is "same" to the sequential decision.
    lenient = run_cli("compare", str(base), str(new), "--rerun", *FLAGS, "--threshold", "30%", "--same-within", "25%")
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert "REGRESSION" not in lenient.stdout and "same" in lenient.stdout
    record = tmp_path / "comparison.json"
    strict = run_cli("compare", str(base), str(new), "--rerun", *FLAGS, "-o", str(record))
    assert strict.returncode == 1 and "REGRESSION" in strict.stdout, strict.stdout + strict.stderr
    (judged,) = load_json(record)["changes"]
    assert judged["verdict"] == "slower" and judged["decision"]["outcome"] == "different"
    assert judged["decision"]["rule"].startswith("GSPRT") and judged["decision"]["alpha"] == 0.01
    assert judged["decision"]["rounds_used"] >= 6


def test_a_side_that_cannot_be_rebuilt_is_named_and_p50_only(tmp_path: Path) -> None:
    gone = _recorded(1.0, {"null.latency_ms": "1"}, model=str(tmp_path / "gone.onnx"))
    base, new = _write(tmp_path / "base.json", gone), _write(tmp_path / "new.json", gone)
    proc = run_cli("compare", str(base), str(new), "--rerun", *FLAGS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not re-measured" in proc.stdout and "gone.onnx" in proc.stdout
    throughput = run_cli("compare", str(base), str(new), "--rerun", "--metric", "throughput")
    assert throughput.returncode == 2 and "--rerun compares p50" in throughput.stderr
