"""`infermeter quantize` through the real CLI: the table, the results file contract, bad input → exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from quant_models import mlp, mlp_data

from cli_helpers import load_json, run_cli


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    model = mlp(tmp_path / "mlp.onnx")
    return model, mlp_data(tmp_path / "calib.npz", model, 120, 1), mlp_data(tmp_path / "eval.npz", model, 150, 2)


def test_quantize_writes_model_and_results(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    model, calib, evaluation = files
    out, results = tmp_path / "out" / "mlp.int8.onnx", tmp_path / "r.json"
    proc = run_cli(
        "quantize", str(model), "-o", str(out), "--calib", str(calib), "--eval", str(evaluation),
        "--method", "entropy", "--per-channel", "--results", str(results), "--threads", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and "INT8 static entropy" in proc.stdout
    cases = load_json(results)["cases"]
    assert [c["quantize"]["role"] for c in cases] == ["fp32", "int8"]
    assert [c["precision_effective"] for c in cases] == ["fp32", "int8"]
    accuracy = cases[1]["accuracy"]
    assert set(accuracy) >= {"metric", "value", "fp32_value", "drop_pct", "eval_samples"}
    assert accuracy["metric"] == "top1" and accuracy["eval_samples"] == 150
    assert cases[1]["status"] == "ok" and cases[1]["latency_ms"]["p50"] > 0


def test_small_calibration_warning_on_stderr(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    model, _, evaluation = files
    tiny = mlp_data(tmp_path / "tiny.npz", model, 10, 5)
    proc = run_cli(
        "quantize", str(model), "-o", str(tmp_path / "q.onnx"), "--calib", str(tiny), "--eval", str(evaluation),
        "--no-latency",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "small_calibration_set" in proc.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "median"], "--method 'median' is not one of"),
        (["--mode", "weird"], "--mode 'weird'"),
        (["--engine", "tensorrt"], "--engine 'tensorrt'"),
        (["--calib", "missing.npz"], "does not exist"),
        (["--exclude", "no_such_node"], "--exclude names node(s) not in the graph"),
        (["--max-drop", "-1"], "--max-drop -1"),
        (["--engine", "openvino"], "writes a .xml file"),
    ],
)
def test_bad_input_exits_2(files: tuple[Path, Path, Path], tmp_path: Path, extra: list[str], message: str) -> None:
    model, _, _ = files
    proc = run_cli("quantize", str(model), "-o", str(tmp_path / "q.onnx"), "--no-latency", *extra)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("error:") == 1


def test_missing_model_exits_2(tmp_path: Path) -> None:
    proc = run_cli("quantize", str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "q.onnx"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
