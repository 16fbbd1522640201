"""`bench --precision int8` on a float model: quantized on the fly, benchmarked as int8, with a warning."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import load_json, run_cli


def test_int8_on_a_float_model_is_quantized_and_reported_as_int8(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli(
        "bench", "tiny_cnn", "-b", "onnxruntime", "--precision", "fp32,int8", "--batch", "2", "--iterations", "10",
        "--min-time", "0", "--target-ci", "0", "--no-roofline", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fp32, int8 = load_json(out)["cases"]
    assert (fp32["precision_effective"], int8["precision_effective"]) == ("fp32", "int8")
    # Quantizing is the build stage's work, recorded with the artifact, apart from the load.
    assert int8["status"] == "ok" and int8["loading"]["build"]["build_phases_s"]["quantize_s"] > 0
    assert "quantize_s" not in int8["loading"]["load_phases_s"]
    assert [w["code"] for w in int8["warnings"]].count("random_calibration") == 1
    assert not any(w["code"] == "random_calibration" for w in fp32["warnings"])
    assert "n/a†" in proc.stdout  # no speedup across fp32 and int8 without --allow-mixed-precision
