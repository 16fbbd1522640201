"""Wrong builds refused before timing: a quantized graph that onnx.checker refuses, or that computes something else
than FP32, is `build_invalid` with the check, the likely cause and the remedy; nothing is timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.build.int8.validate import check_quantized
from infermeter.core.case import Case, MeasureSettings
from infermeter.core.errors import BuildInvalid
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
FEEDS = {"x": np.random.default_rng(0).standard_normal((1, 4, 4)).astype(np.float32)}


def _graph(path: Path, op: str, **attributes: object) -> Path:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name="the_node", **attributes)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def test_an_invalid_transpose_fails_the_checker_and_names_the_node(tmp_path: Path) -> None:
    fp32 = _graph(tmp_path / "fp32.onnx", "Transpose", perm=[0, 2, 1])
    broken = _graph(tmp_path / "int8.onnx", "Transpose", perm=[0, 2, 7])  # an axis the tensor does not have
    with pytest.raises(BuildInvalid) as caught:
        check_quantized(fp32, broken, FEEDS, 1, "m.onnx", per_channel=True)
    message = str(caught.value)
    assert message.startswith("the quantized graph failed ")
    assert "--exclude the_node" in message and "quantize.per_channel=off" in message


def test_a_graph_computing_something_else_fails_parity(tmp_path: Path) -> None:
    fp32 = _graph(tmp_path / "fp32.onnx", "Relu")
    wrong = _graph(tmp_path / "int8.onnx", "Neg")
    with pytest.raises(BuildInvalid, match="failed parity against FP32: its output has a cosine of"):
        check_quantized(fp32, wrong, FEEDS, 2, "m.onnx", per_channel=False)
    check_quantized(fp32, _graph(tmp_path / "same.onnx", "Relu"), FEEDS, 1, "m.onnx", per_channel=False)  # passes


def test_a_wrong_quantizer_build_is_a_build_invalid_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_compile_cache: Path
) -> None:
    """ONNX Runtime's quantizer made to write a wrong graph: the case is refused before timing, with no figures."""
    import infermeter.build.int8.onthefly as onthefly

    def wrong_quantizer(source: Path, target: Path, config: object, calib: object) -> None:
        _graph(Path(target), "Neg")

    monkeypatch.setattr(onthefly, "quantize_onnx", wrong_quantizer)
    spec = resolve_model(str(_graph(tmp_path / "relu.onnx", "Relu")))
    settings = MeasureSettings(warmup_iterations=1, min_iterations=5, min_time_s=0.01, max_time_s=1.0)
    case = Case(
        spec.ref,
        "onnxruntime",
        precision="int8",
        batch=1,
        shape_mode="static",
        threads=1,
        options=(("cache", "off"),),
        settings=settings,
    )
    result = execute_case(spec, case)
    assert result.status == "build_invalid" and result.latency_ms is None and not result.timing.samples_ms
    assert result.error is not None and "parity against FP32" in result.error
