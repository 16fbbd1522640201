"""Dynamic-shape runs (per-shape statistics), concurrent streams and fallback chains, through the CLI."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import load_json, run_cli

FAST = ["--warmup", "1", "--iterations", "30", "--min-time", "0", "--max-time", "10", "--target-ci", "0"]


def test_dynamic_run_reports_statistics_per_shape(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "onnxruntime", "--batch", "2", "--shape-mode", "static,dynamic",
        "--dynamic", "batch=1,2,4", *FAST, "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    static, dynamic = load_json(out)["cases"]
    assert static["shape_mode"] == "static" and static["shapes"]["per_shape"] == []
    assert dynamic["shape_mode"] == "dynamic" and dynamic["status"] == "ok", dynamic["error"]
    assert dynamic["shapes"]["dynamic"] == {"batch": [1, 2, 4]}
    per_shape = {row["label"]: row for row in dynamic["shapes"]["per_shape"]}
    assert set(per_shape) == {"batch=1", "batch=2", "batch=4"}
    assert sum(row["count"] for row in per_shape.values()) == dynamic["timing"]["iterations"]
    assert per_shape["batch=4"]["shapes"] == {"input": [4, 3, 32, 32]}
    # Every shape was warmed up before timing, and memory was sampled through the run.
    assert dynamic["timing"]["warmup_iterations"] >= 3 and dynamic["memory"]["rss_timeline_mb"]
    assert "per-shape latency" in proc.stdout


def test_streams_run_requests_concurrently(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "null", "--batch", "1", "--streams", "1,4", *FAST, "--min-time", "0.5",
        "-O", "null.latency_ms=20", "-O", "null.wait=sleep", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    single, four = load_json(out)["cases"]
    assert (single["streams"], four["streams"]) == (1, 4)
    assert single["id"] != four["id"]
    # Sleeping requests overlap: four streams complete far more requests per second than one.
    assert four["timing"]["throughput"] > 2.5 * single["timing"]["throughput"]
    assert four["latency_ms"]["p50"] >= 20


def test_fallback_chain_runs_the_first_backend_that_works(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "--fallback", "onnxruntime-tensorrt,null", "--batch", "1", *FAST, "-o", str(out)
    )
    if "unknown backend 'onnxruntime-tensorrt'" in proc.stderr:  # before that backend is registered
        proc = run_cli(
            "bench",
            "tiny_cnn",
            "--fallback",
            "onnxruntime,null",
            "--batch",
            "1",
            "--precision",
            "bf16",
            *FAST,
            "-o",
            str(out),
        )
    assert proc.returncode == 0, proc.stderr
    (case,) = load_json(out)["cases"]
    assert case["status"] == "ok" and case["backend"] == "null"
    fallback = case["fallback"]
    assert fallback["ran"] == "null" and fallback["chain"][-1] == "null"
    (skipped_name,) = fallback["skipped"]
    assert fallback["skipped"][skipped_name].startswith("unavailable")


def test_dynamic_flags_need_dynamic_mode(tmp_path: Path) -> None:
    proc = run_cli("bench", "tiny_cnn", "-b", "null", "--dynamic", "batch=1,2", "-o", str(tmp_path / "r.json"))
    assert proc.returncode == 2 and "--shape-mode dynamic" in proc.stderr


def test_cold_start_runs_three_fresh_processes_per_backend(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("bench", "tiny_cnn", "-b", "null", "--batch", "1,8", "--cold-start", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    cases = load_json(out)["cases"]
    assert [(c["options"]["cache"], c["options"]["cold.pass"]) for c in cases] == [
        ("off", "1"),
        ("on", "1"),
        ("on", "2"),
    ]
    assert {c["batch"] for c in cases} == {1}  # one batch per backend: cold start does not depend on the matrix
    for case in cases:
        assert (
            case["status"] == "ok"
            and case["loading"]["process_start_s"] > 0
            and case["loading"]["first_inference_ms"] > 0
        )
    assert "cold start" in proc.stdout and "to first result s" in proc.stdout
