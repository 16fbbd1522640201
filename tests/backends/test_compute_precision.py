"""Compute precision is read from what the engine ran, never from the CPU's flags: an FP16 graph (FP32 inputs and
outputs) on ONNX Runtime's CPU provider runs FP32 kernels between inserted casts, on any x86 CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.backends.compute_precision import majority, ort_kernel_counts, ort_model_precision
from infermeter.core.case import Case
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model
from infermeter.models.spec import ModelSpec
from infermeter.report.summary import precision_cell
from infermeter.results.records import ComputePrecision, read_record
from infermeter.results.schema import case_from_dict, case_to_dict

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def fp16_conv_net(folder: Path) -> Path:
    """A small conv net converted to FP16 with FP32 inputs and outputs (keep_io_types), as a user's FP16 file."""
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.transformers.float16 import convert_float_to_float16

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((8, 10)).astype(np.float32), "fc"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    path = folder / "net_fp16.onnx"
    onnx.save(convert_float_to_float16(model, keep_io_types=True), str(path))
    return path


@pytest.fixture
def fp16_model(tmp_path: Path) -> ModelSpec:
    return resolve_model(str(fp16_conv_net(tmp_path)))


def test_profile_reads_fp32_kernels_for_an_fp16_graph(fp16_model: ModelSpec) -> None:
    assert fp16_model.precision == "fp16"  # the file stores FP16 weights
    assert fp16_model.path is not None
    reading = ort_model_precision(fp16_model.path, {"x": np.zeros((1, 3, 16, 16), np.float32)})
    assert reading is not None and reading.precision == "fp32"
    assert reading.counts.get("fp16", 0) == 0 and reading.counts["fp32"] >= 2  # the Conv and the MatMul
    assert "onnxruntime profile" in reading.evidence()


def test_fp16_model_on_ort_cpu_records_fp32_compute_fp16_storage(fp16_model: ModelSpec) -> None:
    from infermeter.core.case import MeasureSettings

    settings = MeasureSettings(warmup_iterations=2, min_iterations=10, min_time_s=0.05, max_time_s=2.0)
    case = Case(
        str(fp16_model.path),
        "onnxruntime",
        precision="fp32",
        batch=1,
        shape_mode="static",
        threads=1,
        settings=settings,
    )
    result = execute_case(fp16_model, case)
    assert result.status == "ok", result.error
    assert result.precision_effective == "fp32"
    record = read_record(result, ComputePrecision)
    assert record is not None
    assert (record.precision_storage, record.precision_compute, record.precision_model_own) == ("fp16", "fp32", True)
    assert "onnxruntime profile" in record.precision_evidence
    codes = {w.code for w in result.warnings}
    assert "precision_not_requested" not in codes and "fp32_compute_storage" in codes
    assert precision_cell(result) == "fp32 (fp16 model)"
    # The JSON stays flat and readable, and reads back.
    data = case_to_dict(result)
    assert data["precision_storage"] == "fp16" and data["precision_compute"] == "fp32"
    assert read_record(case_from_dict(data), ComputePrecision) == record


def test_kernel_counts_and_majority_from_profile_events() -> None:
    def kernel(op: str, word: str) -> dict[str, object]:
        return {"cat": "Node", "name": f"{op}_kernel_time", "args": {"op_name": op, "input_type_shape": [{word: [1]}]}}

    events = [kernel("Conv", "float16"), kernel("MatMul", "float16"), kernel("Cast", "float"), kernel("Gemm", "float")]
    counts = ort_kernel_counts(events)
    assert counts == {"fp16": 2, "fp32": 1}  # the Cast is no compute kernel
    reading = majority(counts, "x")
    assert reading is not None and reading.precision == "fp16"
    assert majority({}, "x") is None
    tie = majority({"fp16": 1, "fp32": 1}, "x")
    assert tie is not None and tie.precision == "fp32"  # a tie goes to the wider precision


def test_model_own_fp16_label_and_no_precision_change() -> None:
    own = ComputePrecision("fp16", "fp16", True)
    assert own.label() == "fp16 (model)" and own.model_own("fp32")
    assert not ComputePrecision("fp16", "fp16", False).model_own("fp32")  # a conversion of ours is a change
    assert ComputePrecision("fp16", "fp32", True).label() == "fp32 (fp16 model)"
    assert ComputePrecision("fp16", "fp32", False).label() == "fp32 (fp16 storage)"
    assert ComputePrecision("fp32", "fp32").label() == "fp32"


def test_cpu_flags_claiming_fp16_change_nothing(fp16_model: ModelSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU whose flags list AVX512-FP16 (the Xeon of issue 49) still gets FP32 kernels from ONNX Runtime's CPU
    provider: the flags are not read for the compute precision at all."""
    import infermeter.results.env as env
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend

    monkeypatch.setattr(env, "cpu_isa", lambda: ["avx512f", "avx512_fp16", "amx_fp16"])
    case = Case(
        str(fp16_model.path),
        "onnxruntime",
        precision="fp32",
        batch=1,
        shape_mode="static",
        threads=1,
        options=(("cache", "off"),),
    )
    session = OnnxRuntimeBackend().load(fp16_model, case)
    assert session.compute_evidence is None  # the probe runs after load (untimed), not inside load_s
    assert session.effective_precision() == "fp32" and session.stored_precision == "fp16"
    assert any(code == "fp32_compute_storage" for code, _ in session.warnings)


@pytest.mark.parametrize(("precision", "options"), [("fp32", {}), ("bf16", {"torch.autocast": "on"})])
def test_torch_compute_read_from_the_profiler(precision: str, options: dict[str, str]) -> None:
    """torch's profiler names the dtypes its convolutions and matmuls ran in: autocast's bf16 with fp32 weights."""
    from infermeter.backends._common import cpu_precision_reason, dummy_feeds
    from infermeter.backends.registry import get_backend

    if cpu_precision_reason(precision, "torch"):
        pytest.skip(f"this CPU has no {precision} arithmetic")
    spec = resolve_model("tiny_cnn")
    case = Case(
        "tiny_cnn",
        "torch",
        precision=precision,
        batch=1,
        shape_mode="static",
        threads=1,
        options=tuple(options.items()),
    )
    session = get_backend("torch")().load(spec, case)
    session.read_compute(session.prepare(dummy_feeds(spec, case)))
    assert session.effective_precision() == precision and session.stored_precision == "fp32"
    assert session.compute_evidence is not None and session.compute_evidence.startswith("torch profiler")


def test_openvino_compute_read_from_the_runtime_model() -> None:
    pytest.importorskip("openvino")
    from infermeter.backends.registry import get_backend

    spec = resolve_model("tiny_cnn")
    case = Case(
        "tiny_cnn", "openvino", precision="fp32", batch=1, shape_mode="static", threads=1, options=(("cache", "off"),)
    )
    session = get_backend("openvino")().load(spec, case)
    assert session.effective_precision() == "fp32"
    assert session.compute_evidence is not None and "runtimePrecision" in session.compute_evidence
