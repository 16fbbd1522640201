"""`bench --precision int8` on a float model: each engine's INT8 graph is made by its own quantizer in the build
stage (NNCF for OpenVINO, ONNX Runtime's static QDQ for ONNX Runtime), with the same calibration rules; OpenVINO
can be cross-fed ONNX Runtime's QDQ graph explicitly (`openvino.int8_source=qdq`). Each INT8 row records the
precision asked and read back, the per-layer mix, the quantizer, and OpenVINO's per-node profile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from infermeter.core.case import Case
from infermeter.report.summary import precision_cell, summary_table
from infermeter.results.io import read_results
from infermeter.results.records import Int8Run, read_record, why_int8

pytest.importorskip("openvino")
pytest.importorskip("nncf")

FAST = ["--warmup", "1", "--iterations", "5", "--min-time", "0", "--max-time", "5", "--rounds", "2", "--target-ci", "0"]


def test_each_engine_runs_int8_from_its_own_quantizer_and_says_what_ran(tmp_path: Path) -> None:
    out = tmp_path / "int8.json"
    done = run_cli(
        "bench", "tiny_cnn", "-b", "openvino", "-b", "openvino:int8_source=qdq", "-b", "onnxruntime",
        "--precision", "int8", *FAST, "--no-roofline", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    cases = {(c.backend, c.options.get("openvino.int8_source", "own")): c for c in read_results(out).cases}
    own, crossed, ort = cases[("openvino", "own")], cases[("openvino", "qdq")], cases[("onnxruntime", "own")]
    for case in (own, crossed, ort):
        assert case.status == "ok", case.error
        assert (case.precision, case.precision_effective) == ("int8", "int8")
        assert "random_calibration" in {w.code for w in case.warnings}
    record = read_record(own, Int8Run)
    assert record is not None and (record.quantizer, record.source) == ("nncf", "own")
    assert record.mix is not None and record.mix.counts == {"int8": 3}  # two convolutions and the classifier
    assert any(note == "int8: int8 (nncf; 3 int8 of 3 compute layers)" for note in own.notes)
    assert (
        own.loading.build is not None
        and own.loading.build.quantizer == "nncf"
        and "quantize_s" in own.loading.build.build_phases_s
    )
    # The untimed profile pass: OpenVINO's per-node counters, for the INT8 graph and its FP32 twin.
    assert record.profile is not None and record.fp32_profile is not None, record.profile_error
    assert record.profile.total_ms > 0 and record.profile.top and record.profile.float_compute.count == 0
    assert record.fp32_profile.float_compute.count == 3
    assert why_int8(record, 0.5).startswith("INT8 was 2.0x slower: ")
    crossed_record = read_record(crossed, Int8Run)
    assert crossed_record is not None and (crossed_record.quantizer, crossed_record.source) == ("ort-qdq", "cross-fed")
    assert crossed_record.mix is not None and crossed_record.mix.counts.get("int8", 0) >= 2
    # The table says what ran, and its footnotes where the time went (no FP32 row here: no ratio).
    assert precision_cell(own) == "int8 (nncf 3/3)" and precision_cell(ort) == "int8 (ort-qdq 3/3)"
    footnotes = summary_table(list(cases.values())).footnotes
    assert any("openvino int8" in n and ": INT8: " in n and "Reorder/Convert" in n for n in footnotes), footnotes
    # ONNX Runtime: the mix read from its optimized graph (QDQ pairs fused into QLinear operators), the profile
    # from its own profiler (the input's QuantizeLinear and the output's DequantizeLinear stay unfused).
    ort_record = read_record(ort, Int8Run)
    assert ort_record is not None and ort_record.quantizer == "ort-qdq"
    assert ort_record.mix is not None and ort_record.mix.counts.get("int8", 0) >= 2, ort_record.mix
    assert ort_record.profile is not None and ort_record.fp32_profile is not None, ort_record.profile_error
    assert ort_record.profile.quantize_nodes.count >= 1 and ort_record.fp32_profile.quantize_nodes.count == 0
    assert ort_record.fp32_profile.float_compute.count >= 2 and ort_record.profile.total_ms > 0


def test_nncf_on_the_fly_uses_the_calibration_data_and_is_cached(tmp_path: Path) -> None:
    from infermeter.build.int8.onthefly import model_is_quantized, quantize_on_the_fly
    from infermeter.models.resolve import resolve_model

    spec = resolve_model("tiny_cnn")
    data = tmp_path / "calib.npz"
    np.savez(data, input=np.random.default_rng(0).random((8, 3, 32, 32), dtype=np.float32))
    case = Case("tiny_cnn", "openvino", precision="int8", options=(("quantize.calib", str(data)),))
    made = quantize_on_the_fly(spec, case, "nncf")
    assert made.path.suffix == ".xml" and made.path.with_suffix(".bin").is_file()
    assert (made.quantizer, made.warnings) == ("nncf", ())  # real data: no random-calibration warning
    assert model_is_quantized(resolve_model(str(made.path))) and not model_is_quantized(spec)
    before = made.path.stat().st_mtime_ns
    assert quantize_on_the_fly(spec, case, "nncf").path.stat().st_mtime_ns == before  # a cache hit


def test_an_ort_calibration_method_on_nncf_is_refused_with_the_way_out() -> None:
    from infermeter.backends.registry import get_backend
    from infermeter.models.resolve import resolve_model

    spec = resolve_model("tiny_cnn")
    openvino = get_backend("openvino")
    entropy = (("quantize.method", "entropy"),)
    reason = openvino.unsupported_reason(spec, Case("tiny_cnn", "openvino", precision="int8", options=entropy))
    assert reason is not None and "openvino.int8_source=qdq" in reason
    crossed = (("openvino.int8_source", "qdq"), ("quantize.method", "entropy"))
    assert openvino.unsupported_reason(spec, Case("tiny_cnn", "openvino", precision="int8", options=crossed)) is None
    assert openvino.int8_quantizer_for(Case("tiny_cnn", "openvino", precision="int8", options=crossed)) == "ort-qdq"
    assert get_backend("onnxruntime").int8_quantizer == "ort-qdq" and get_backend("torch").int8_quantizer is None
