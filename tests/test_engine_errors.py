"""Engine errors in full: the line that says why, not the first line of a C++ trace (errors.engine_message), and the
whole text kept in the results file (measure.execute.record_failure). Real OpenVINO and ONNX Runtime failures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from backend_helpers import FAST
from infermeter.core.case import Case
from infermeter.core.errors import BackendError, describe_exception, engine_message
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model


def _save(path: Path, nodes: list[onnx.NodeProto], extra_opsets: tuple[tuple[str, int], ...] = ()) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [4, 4])],
    )
    opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, v) for d, v in extra_opsets)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _mystery(tmp_path: Path) -> Path:
    """A valid ONNX file with an operator no engine knows."""
    node = helper.make_node("Mystery", ["x"], ["y"], domain="com.example")
    return _save(tmp_path / "mystery.onnx", [node], (("com.example", 1),))


def _openvino_read_error(path: Path) -> Exception:
    ov = pytest.importorskip("openvino")
    with pytest.raises(Exception) as caught:
        ov.Core().read_model(str(path))
    assert isinstance(caught.value, Exception)
    return caught.value


@pytest.mark.parametrize("suffix, content", [(".onnx", b"not a protobuf at all"), (".xml", b"<net><layers>")])
def test_openvino_corrupt_file_reason_not_location(tmp_path, suffix, content):
    path = tmp_path / f"corrupt{suffix}"
    path.write_bytes(content)
    exc = _openvino_read_error(path)
    assert str(exc).splitlines()[0].startswith("Exception from src/")  # the trap: the first line is a location
    message = engine_message(exc)
    assert message.startswith("Unable to read the model"), message
    assert str(path) in message and "Exception from" not in message and "\n" not in message


def test_openvino_unconverted_op_names_the_op(tmp_path):
    message = describe_exception(_openvino_read_error(_mystery(tmp_path)))
    assert "No conversion rule found for operations: com.example.Mystery" in message, message
    assert "Check '" not in message and ".cpp" not in message


def test_openvino_backend_and_results_file_carry_the_reason(tmp_path):
    pytest.importorskip("openvino")
    spec = resolve_model(str(_mystery(tmp_path)))
    result = execute_case(
        spec, Case(spec.ref, "openvino", batch=1, threads=1, settings=FAST, options=(("cache", "off"),))
    )
    assert result.status == "failed"
    assert result.error is not None and "com.example.Mystery" in result.error and "core.cpp" not in result.error
    # The whole engine text, locations included, stays in the notes of the results file.
    assert any("Exception from src/inference/src/cpp/core.cpp" in note for note in result.notes), result.notes


def test_onnxruntime_run_failure_reason_and_full_text(tmp_path):
    pytest.importorskip("onnxruntime")
    spec = resolve_model(str(_save(tmp_path / "reshape.onnx", [helper.make_node("Reshape", ["x", "shape"], ["y"])])))
    result = execute_case(spec, Case(spec.ref, "onnxruntime", batch=2, threads=1, settings=FAST))
    assert result.status == "failed"
    assert result.error is not None
    assert "The input tensor cannot be reshaped to the requested shape" in result.error, result.error
    assert "reshape_helper.h" not in result.error and "onnxruntime::ReshapeHelper" not in result.error
    assert any("reshape_helper.h" in note for note in result.notes)


def test_plain_messages_and_our_own_errors_unchanged():
    assert describe_exception(ValueError("bad value")) == "ValueError: bad value"
    assert describe_exception(ValueError("")) == "ValueError"
    assert describe_exception(BackendError("ours, as written")) == "ours, as written"
    assert engine_message("x" * 500, max_chars=50) == "x" * 49 + "…"
    torch_like = 'Dynamo failed on mul: shapes differ\n\nfrom user code:\n  File "m.py", line 3, in forward\n    x * y'
    assert engine_message(torch_like) == "Dynamo failed on mul: shapes differ"


def test_reshape_model_really_fails_in_onnxruntime(tmp_path):
    """The ORT case above is a real failure of the engine, not of infermeter."""
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(
        str(_save(tmp_path / "r.onnx", [helper.make_node("Reshape", ["x", "shape"], ["y"])]))
    )
    with pytest.raises(Exception) as caught:
        session.run(None, {"x": np.zeros((2, 3), np.float32)})
    assert "reshape_helper.h" in str(caught.value)
    assert "reshape_helper.h" not in engine_message(caught.value)
