"""TensorRT backend without a GPU: the unavailable path, optimization-profile shapes and the engine cache key."""

from __future__ import annotations

import pytest

from infermeter.backends._tensorrt_engine import engine_cache_key, parse_shape_list, profile_shapes
from infermeter.backends.tensorrt_backend import TensorRTBackend
from infermeter.core.errors import InputSpecError
from infermeter.measure.worker import execute_case


def test_unavailable_says_why_and_how(tiny_cnn, make_case):
    reason = TensorRTBackend.available()
    if reason is None:
        pytest.skip("TensorRT and a GPU are present")
    assert "pip install" in reason or "GPU" in reason
    result = execute_case(tiny_cnn, make_case("tensorrt"))
    assert result.status == "unavailable" and result.error == reason


def test_static_profile_is_the_case_shape(tiny_cnn, make_case):
    profile = profile_shapes(tiny_cnn, make_case("tensorrt", batch=4))
    assert profile == {"input": ((4, 3, 32, 32),) * 3}


def test_dynamic_profile_spans_batch_one_to_case_batch(tiny_cnn, make_case):
    profile = profile_shapes(tiny_cnn, make_case("tensorrt", batch=8, shape_mode="dynamic"))
    assert profile["input"] == ((1, 3, 32, 32), (8, 3, 32, 32), (8, 3, 32, 32))


def test_profile_overrides_from_options(tiny_cnn, make_case):
    case = make_case("tensorrt", batch=4, shape_mode="dynamic", options={"tensorrt.max_shapes": "input:32x3x32x32"})
    assert profile_shapes(tiny_cnn, case)["input"][2] == (32, 3, 32, 32)
    bad = make_case("tensorrt", batch=4, options={"tensorrt.max_shapes": "input:2x3x32x32"})
    with pytest.raises(InputSpecError, match="min <= opt <= max"):
        profile_shapes(tiny_cnn, bad)
    with pytest.raises(InputSpecError, match="NAME:DxDxD"):
        parse_shape_list("input=1x3", "tensorrt.min_shapes")
    assert parse_shape_list("a:1x2, b:3", "x") == {"a": (1, 2), "b": (3,)}


def test_cache_key_covers_precision_shapes_version_and_gpu(tiny_cnn, make_case):
    profile = profile_shapes(tiny_cnn, make_case("tensorrt"))
    base = engine_cache_key(tiny_cnn, "fp16", profile, "10.8.0", "NVIDIA H200")
    assert base == engine_cache_key(tiny_cnn, "fp16", profile, "10.8.0", "NVIDIA H200")
    other_profile = profile_shapes(tiny_cnn, make_case("tensorrt", batch=16))
    for variant in (
        engine_cache_key(tiny_cnn, "fp32", profile, "10.8.0", "NVIDIA H200"),
        engine_cache_key(tiny_cnn, "fp16", other_profile, "10.8.0", "NVIDIA H200"),
        engine_cache_key(tiny_cnn, "fp16", profile, "10.9.0", "NVIDIA H200"),
        engine_cache_key(tiny_cnn, "fp16", profile, "10.8.0", "NVIDIA A100"),
    ):
        assert variant != base


def test_int8_on_a_float_model_is_served_a_tensorrt_ready_qdq_graph(tiny_cnn, make_case):
    # Written for a GPU, checked here without one: the build stage's graph is what TensorRT's explicit
    # quantization takes (symmetric int8 activations and weights, zero points 0); the engine build needs the GPU.
    import onnx
    from onnx import numpy_helper

    from infermeter.build.int8.onthefly import quantize_on_the_fly

    case = make_case("tensorrt", precision="int8")
    assert TensorRTBackend.unsupported_reason(tiny_cnn, case) is None
    assert TensorRTBackend.int8_quantizer_for(case) == "trt-qdq"
    made = quantize_on_the_fly(tiny_cnn, case, "trt-qdq")
    graph = onnx.load(str(made.path)).graph
    points = {i.name: numpy_helper.to_array(i) for i in graph.initializer if "zero_point" in i.name}
    quantizers = [n for n in graph.node if n.op_type == "QuantizeLinear"]
    assert made.quantizer == "trt-qdq" and quantizers and points
    # Symmetric: every zero point 0; activations and weights int8 (biases int32).
    assert all(not p.any() for p in points.values()) and points["input_zero_point"].dtype.name == "int8"
    assert {p.dtype.name for p in points.values()} <= {"int8", "int32"}
