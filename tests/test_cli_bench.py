"""`infermeter bench` end to end through the real CLI, on the synthetic `null` backend."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import load_json, run_cli

FAST = ["--warmup", "2", "--iterations", "20", "--min-time", "0", "--max-time", "5", "--target-ci", "0"]


def test_null_sweep_writes_the_contracted_results_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "null", "--batch", "1,4", *FAST, "-O", "null.latency_ms=2", "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    data = load_json(out)
    assert data["schema_version"] == 2
    assert {"created", "environment", "cases"} <= set(data)
    env = data["environment"]
    assert {
        "cpu_model",
        "isa",
        "logical_cores",
        "physical_cores",
        "memory_total_gb",
        "os",
        "python",
        "frameworks",
    } <= set(env)
    assert [c["batch"] for c in data["cases"]] == [1, 4]
    contract = {
        "id", "model", "backend", "backend_version", "device", "batch", "shape_mode", "precision",
        "precision_effective", "threads", "status", "error", "latency_ms", "timing", "memory", "loading", "shapes",
        "warnings",
    }  # fmt: skip
    groups = {
        "timing": {"samples_ms", "warmup_ms", "iterations", "warmup_iterations", "throughput", "rounds_p50_ms"},
        "memory": {"peak_rss_mb", "rss_before_load_mb"},
        "loading": {"load_s", "load_phases_s", "first_inference_ms"},
        "shapes": {"input_shapes", "dynamic", "per_shape"},
    }
    for case in data["cases"]:
        assert contract <= set(case) and all(names <= set(case[group]) for group, names in groups.items())
        timing, memory, loading = case["timing"], case["memory"], case["loading"]
        assert case["model"] == "tiny_cnn" and case["backend"] == "null" and case["device"] == "cpu"
        assert case["status"] == "ok" and case["error"] is None
        assert (case["precision"], case["precision_effective"], case["shape_mode"]) == ("fp32", "fp32", "static")
        assert timing["iterations"] == len(timing["samples_ms"]) == 20
        assert timing["warmup_iterations"] == 2
        stats = case["latency_ms"]
        assert set(stats) >= {
            "p50",
            "p90",
            "p95",
            "p99",
            "p999",
            "mean",
            "std",
            "min",
            "max",
            "cv",
            "p50_ci95",
            "p99_ci95",
        }
        # The null backend spins for 2 ms: the loop's own cost adds microseconds, never less than 2 ms.
        assert 2.0 <= stats["min"] <= stats["p50"] <= stats["p99"] <= stats["max"]
        assert stats["p50_ci95"][0] <= stats["p50"] <= stats["p50_ci95"][1]
        expected_throughput = case["batch"] * len(timing["samples_ms"]) / (sum(timing["samples_ms"]) / 1e3)
        assert timing["throughput"] == pytest.approx(expected_throughput, rel=1e-3)
        assert memory["peak_rss_mb"] > 10 and loading["load_s"] >= 0 and loading["first_inference_ms"] >= 2.0
    assert "null" in proc.stdout and "P50 ms" in proc.stdout and str(out) in proc.stdout


def test_crash_hang_and_failure_are_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "null", "--batch", "1,2,3,4", *FAST, "--case-timeout", "60", "-o", str(out),
        "-O", "null.crash=run",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [c["status"] for c in cases] == ["crashed"] * 4
    assert "SIGSEGV" in cases[0]["error"]
    mixed = tmp_path / "mixed.json"
    for timeout, extra in (
        ("6", ["-O", "null.hang=load"]),
        ("60", ["-O", "null.fail=run"]),
        ("60", ["-O", "null.crash=load", "-O", "null.crash_signal=abort"]),
    ):
        # Each run adds its cases to the same file: --resume-extend grows the stored plan.
        target = ["--resume", str(mixed), "--resume-extend"] if mixed.exists() else ["-o", str(mixed)]
        proc = run_cli(
            "bench", "tiny_cnn", "-b", "null", "--batch", "1", *FAST, "--case-timeout", timeout, *target, *extra
        )
        assert proc.returncode == 0, proc.stderr
    statuses = [(c["status"], c["error"]) for c in load_json(mixed)["cases"]]
    assert [s for s, _ in statuses] == ["timeout", "failed", "crashed"]
    assert "case-timeout" in statuses[0][1]
    assert "null.fail" in statuses[1][1]
    assert "SIGABRT" in statuses[2][1]


def test_killed_sweep_keeps_finished_cases_and_resume_completes_it(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["bench", "tiny_cnn", "-b", "null", "--batch", "1,2,3,4,5,6", "--warmup", "0", "--iterations", "5",
            "--min-time", "0.8", "--max-time", "5", "-O", "null.wait=sleep"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", *args, "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and len(json.loads(out.read_text())["cases"]) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = load_json(out)["cases"]  # the file is complete JSON even though the writer was killed
    assert 2 <= len(finished) < 6
    # A kill mid-write may leave the one temp file being written; never more, and never in place of the file.
    assert len(list(tmp_path.glob(".r.json.*.tmp"))) <= 1
    resumed = run_cli("bench", "--resume", str(out))  # the plan comes from the file
    assert resumed.returncode == 0, resumed.stderr
    cases = load_json(out)["cases"]
    assert [c["batch"] for c in cases] == [1, 2, 3, 4, 5, 6]
    assert [c["id"] for c in cases[: len(finished)]] == [c["id"] for c in finished]


def test_ctrl_c_saves_finished_cases_and_says_how_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["bench", "tiny_cnn", "-b", "null", "--batch", "1,2,3,4", "--warmup", "0", "--iterations", "5",
            "--min-time", "1.5", "-O", "null.wait=sleep", "-o", str(out)]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and len(json.loads(out.read_text())["cases"]) >= 1:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "--resume" in stderr and "Traceback" not in stderr
    assert 1 <= len(load_json(out)["cases"]) < 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_model", "-b", "null"], "unknown model 'no_such_model'"),
        (["tiny_cnn", "-b", "nope"], "unknown backend 'nope'"),
        (["tiny_cnn", "-b", "null", "--batch", "x"], "--batch 'x' is not an integer"),
        (["tiny_cnn", "-b", "null", "--batch", "0"], "--batch 0 must be positive"),
        (["tiny_cnn", "-b", "null", "--precision", "fp64"], "--precision 'fp64' is not one of"),
        (["tiny_cnn", "-b", "null", "--iterations", "-3"], "--iterations -3 must be positive"),
        (["tiny_cnn", "-b", "null", "--input", "input:1xAx3"], "is not NAME:DIMS"),
        (["tiny_cnn", "-b", "null", "--input", "pixels:1x3x32x32"], "not an input of the model (its inputs: input)"),
        (["tiny_cnn", "-b", "null", "--input", "input:1x3x32"], "3 dims given"),
        (["tiny_cnn", "-b", "null", "--input", "input:1x4x32x32"], "fixed at 3"),
        (["tiny_cnn", "-b", "null", "--threads", "abc"], "'abc' is not a valid integer"),
        (["tiny_cnn", "-b", "null", "--no-such-flag"], "No such option"),
        (["missing.onnx", "-b", "null"], "does not exist"),
        (["tiny_cnn", "-b", "null", "-O", "novalue"], "is not KEY=VALUE"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run_cli("bench", *args, "-o", str(tmp_path / "r.json"), timeout=60)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert message in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("content", [b"", b"this is not protobuf \x00\xff garbage", b"\x08\x07"])
def test_corrupt_onnx_file_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    model = tmp_path / "broken.onnx"
    model.write_bytes(content)
    proc = run_cli("bench", str(model), "-b", "null", "-o", str(tmp_path / "r.json"), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "broken.onnx" in proc.stderr and "Traceback" not in proc.stderr


def test_debug_flag_shows_the_traceback(tmp_path: Path) -> None:
    proc = run_cli("--debug", "bench", "no_such_model", "-b", "null", timeout=60)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_unavailable_precision_is_recorded_not_fatal(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "onnxruntime", "--precision", "bf16", "--batch", "1", *FAST, "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    (case,) = load_json(out)["cases"]
    assert case["status"] == "unavailable" and "bf16" in case["error"]


def test_backends_and_env_commands() -> None:
    proc = run_cli("backends", "--json", timeout=60)
    assert proc.returncode == 0
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert rows["null"]["available"] and rows["torch"]["available"] and rows["onnxruntime"]["available"]
    assert all(row["available"] or row["reason"] for row in rows.values())
    proc = run_cli("env", "--json", timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["logical_cores"] >= 1


def test_worker_peak_memory_is_its_own_not_its_parents() -> None:
    import numpy as np
    import psutil

    from infermeter.core.case import Case, MeasureSettings
    from infermeter.measure.worker import run_isolated
    from infermeter.models.resolve import resolve_model

    ballast = np.ones(400 * 2**20 // 8)  # 400 MB resident in this (parent) process
    parent_rss_mb = psutil.Process().memory_info().rss / 2**20
    settings = MeasureSettings(warmup_iterations=0, min_iterations=3, min_time_s=0.0)
    result = run_isolated(resolve_model("tiny_cnn"), Case("tiny_cnn", "null", settings=settings))
    assert result.status == "ok" and result.memory.peak_rss_mb is not None
    # The kernel carries ru_maxrss across fork+exec; the worker must report its own high-water mark.
    assert result.memory.peak_rss_mb < parent_rss_mb - 300, (result.memory.peak_rss_mb, parent_rss_mb)
    assert ballast.sum() > 0
