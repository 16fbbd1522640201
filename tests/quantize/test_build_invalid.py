"""Wrong builds refused before timing: a quantized graph that onnx.checker refuses, or that computes something else
than FP32, is `build_invalid` with the check, the likely cause and the remedy; nothing is timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.build.validate import check_quantized
from infermeter.core.case import Case, MeasureSettings
from infermeter.core.errors import BuildInvalid
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
FEEDS = {"x": np.random.default_rng(0).standard_normal((1, 4, 4)).astype(np.float32)}


def _graph(path: Path, op: str, weight: bool = False, **attributes: object) -> Path:
    """One node on x (1, 4, 4); with `weight`, a 4×4 weight as its second input (an IR then has a .bin)."""
    from onnx import TensorProto, helper, numpy_helper

    inputs, inits = ["x"], []
    if weight:
        inputs.append("w")
        inits.append(numpy_helper.from_array(np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32), "w"))
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], name="the_node", **attributes)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4])],
        inits,
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


def _settings() -> MeasureSettings:
    return MeasureSettings(warmup_iterations=1, min_iterations=5, min_time_s=0.01, max_time_s=1.0, target_ci=0.0)


def _case(spec_ref: str, backend: str, precision: str) -> Case:
    return Case(spec_ref, backend, precision=precision, batch=1, shape_mode="static", threads=1, settings=_settings())


@pytest.mark.parametrize("cut", [".bin", ".xml"])
def test_a_truncated_nncf_ir_is_build_invalid_and_the_sweep_goes_on(
    cut: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_compile_cache: Path
) -> None:
    """The IR the NNCF quantizer wrote, cut short on disk: `build_invalid` through the build stage, before any
    timing, naming the check and the cause; the next case runs and both are in the results file."""
    ov = pytest.importorskip("openvino")
    import infermeter.build.int8.ov_quant as ov_quant
    from infermeter.measure.plan import PlanItem
    from infermeter.measure.sweep import run_sweep
    from infermeter.results.io import read_results
    from infermeter.results.schema import ResultsFile

    def truncated_ir(source: Path, target: Path, config: object, calib: object) -> str:
        ov.save_model(ov.Core().read_model(str(source)), str(target), compress_to_fp16=False)
        written = target.with_suffix(cut)
        written.write_bytes(written.read_bytes()[: len(written.read_bytes()) // 2])
        return "an IR cut short"

    monkeypatch.setattr(ov_quant, "quantize_openvino", truncated_ir)
    spec = resolve_model(str(_graph(tmp_path / "mm.onnx", "MatMul", weight=True)))
    plan = [PlanItem(spec, (_case(spec.ref, "openvino", "int8"),)),
            PlanItem(spec, (_case(spec.ref, "onnxruntime", "fp32"),))]  # fmt: skip
    path = tmp_path / "results.json"
    run_sweep(plan, ResultsFile("now", {}), path, isolate=False)
    invalid, fine = read_results(path).cases  # both on disk
    assert invalid.status == "build_invalid" and invalid.latency_ms is None and not invalid.timing.samples_ms
    assert "the NNCF-quantized IR failed core.read_model: OpenVINO cannot read the IR back" in (invalid.error or "")
    assert "-O openvino.int8_source=qdq" in (invalid.error or "")
    assert fine.status == "ok" and fine.latency_ms is not None


def test_a_compiled_model_that_computes_something_else_is_build_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_compile_cache: Path
) -> None:
    """OpenVINO's exported blob made from another graph (a wrong compile): refused by parity against FP32."""
    pytest.importorskip("openvino")
    from infermeter.backends.openvino_backend import OpenVinoBackend
    from infermeter.build.case_build import build_artifact

    spec = resolve_model(str(_graph(tmp_path / "relu.onnx", "Relu")))
    wrong = resolve_model(str(_graph(tmp_path / "neg.onnx", "Neg")))
    real_build = OpenVinoBackend.build
    monkeypatch.setattr(
        OpenVinoBackend, "build", lambda self, model, case, target: real_build(self, wrong, case, target)
    )
    with pytest.raises(BuildInvalid) as caught:
        build_artifact(spec, _case(spec.ref, "openvino", "fp32"))
    message = str(caught.value)
    assert message.startswith("openvino's built artifact failed parity against FP32: its output has a cosine of")
    assert "--localize" in message
    monkeypatch.setattr(OpenVinoBackend, "build", real_build)
    assert build_artifact(spec, _case(spec.ref, "openvino", "fp32")) is not None  # the sound build passes


def test_an_output_of_another_shape_fails_parity_and_says_both_shapes(tmp_path: Path) -> None:
    fp32 = _graph(tmp_path / "fp32.onnx", "Relu")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["y"], name="the_node", keepdims=1)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(tmp_path / "sum.onnx"))
    with pytest.raises(BuildInvalid, match=r"its output has the shape \(1, 1, 1\), FP32's \(1, 4, 4\)"):
        check_quantized(fp32, tmp_path / "sum.onnx", FEEDS, 1, "m.onnx", per_channel=False)
