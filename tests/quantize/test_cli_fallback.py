"""`infermeter quantize --to fp16|bf16` through the real CLI: the tables, the one-line engines, bad input → exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli
from precision_models import layernorm_classifier


def test_study_prints_the_kept_layers_and_one_line_engines(tmp_path: Path) -> None:
    model = layernorm_classifier(tmp_path / "ln.onnx")
    out = tmp_path / "study"
    proc = run_cli("quantize", str(model), "--to", "fp16", "-b", "onnxruntime,tvm", "-o", str(out), "--no-latency",
                   "--samples", "24", "--threads", "1")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "FP16 vs FP32" in proc.stdout and "layers kept in FP32" in proc.stdout
    assert "emulated fp16" in proc.stdout and "pow" in proc.stdout
    assert "tvm: no reduced-precision fallback path here" in proc.stdout
    assert (out / "ln.fp16.mixed.onnx").is_file() and (out / "ln.fp32.onnx").is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--to", "fp16", "--calib", "x.npz"], "--calib applies only without --to"),
        (["--threshold", "0.5", "-o", "m.onnx"], "--threshold applies only with --to"),
        (["--to", "fp16", "-o", "m.onnx"], "-o is a folder"),
        (["--to", "fp16", "-b", "nope"], "is not an inference backend"),
        (["--to", "fp16", "--max-changed", "-1"], "--max-changed -1 must be zero or more"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, extra: list[str], message: str) -> None:
    model = layernorm_classifier(tmp_path / "ln.onnx")
    proc = run_cli("quantize", str(model), *extra)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
