"""LiteRT backend on a real .tflite file written with LiteRT's own flatbuffer schema (no TensorFlow needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend_helpers import FAST, write_tflite_mlp
from infermeter.backends.tflite import TFLiteBackend
from infermeter.core.case import Case
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model

pytest.importorskip("ai_edge_litert")


@pytest.fixture
def mlp(tmp_path: Path) -> tuple[Path, list[tuple[np.ndarray, np.ndarray]]]:
    rng = np.random.default_rng(3)
    weights = [
        (rng.standard_normal((32, 16)).astype(np.float32), rng.standard_normal(32).astype(np.float32)),
        (rng.standard_normal((10, 32)).astype(np.float32), rng.standard_normal(10).astype(np.float32)),
    ]
    return write_tflite_mlp(tmp_path / "mlp.tflite", weights, 16), weights


def torch_mlp(weights: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    import torch

    out = torch.from_numpy(x)
    for layer, (w, b) in enumerate(weights):
        out = torch.nn.functional.linear(out, torch.from_numpy(w), torch.from_numpy(b))
        if layer < len(weights) - 1:
            out = torch.relu(out)
    return out.numpy()


def test_resolve_reads_inputs_from_the_file(mlp):
    spec = resolve_model(str(mlp[0]))
    assert spec.kind == "tflite" and not spec.has_torch_form
    assert [(i.name, i.dtype, i.shape) for i in spec.inputs] == [("input", "float32", ("batch", 16))]
    assert spec.output_names == ("logits",)


def test_outputs_match_torch_at_the_case_batch(mlp):
    path, weights = mlp
    spec = resolve_model(str(path))
    session = TFLiteBackend().load(spec, Case(str(path), "tflite", batch=4, threads=2, settings=FAST))
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    output = session.outputs_to_numpy(session.run(session.prepare({"input": x})))[0]
    np.testing.assert_allclose(output, torch_mlp(weights, x), rtol=1e-4, atol=1e-4)
    # Another batch (dynamic mode) resizes the interpreter instead of failing.
    y = x[:2]
    np.testing.assert_allclose(
        session.outputs_to_numpy(session.run(session.prepare({"input": y})))[0],
        torch_mlp(weights, y),
        rtol=1e-4,
        atol=1e-4,
    )
    assert session.effective_precision() == "fp32"


def test_measured_through_the_core(mlp):
    path = str(mlp[0])
    result = execute_case(resolve_model(path), Case(path, "tflite", batch=2, threads=1, settings=FAST))
    assert result.status == "ok", result.error
    assert result.precision_effective == "fp32" and result.timing.iterations >= 5


def test_zoo_model_is_unavailable_with_reason(tiny_cnn):
    reason = TFLiteBackend.unsupported_reason(tiny_cnn, Case("tiny_cnn", "tflite"))
    assert reason is not None and ".tflite" in reason


def test_onnx_backends_refuse_a_tflite_model_openvino_reads_it(mlp):
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend
    from infermeter.backends.openvino_backend import OpenVinoBackend

    spec = resolve_model(str(mlp[0]))
    assert "tflite backend" in (OnnxRuntimeBackend.unsupported_reason(spec, Case(str(mlp[0]), "onnxruntime")) or "")
    # OpenVINO reads a .tflite file with its TFLite frontend: a second engine for every TFLite model.
    assert OpenVinoBackend.unsupported_reason(spec, Case(str(mlp[0]), "openvino")) is None
    int8 = OpenVinoBackend.unsupported_reason(spec, Case(str(mlp[0]), "openvino", precision="int8"))
    assert int8 is not None and "quantized .tflite" in int8  # a float .tflite is not quantized on the fly


def test_openvino_runs_a_tflite_file_as_litert_does(mlp):
    pytest.importorskip("openvino")
    from infermeter.backends.openvino_backend import OpenVinoBackend

    path, weights = mlp
    spec = resolve_model(str(path))
    session = OpenVinoBackend().load(spec, Case(str(path), "openvino", batch=3, threads=2, settings=FAST))
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    output = session.outputs_to_numpy(session.run(session.prepare({"input": x})))[0]
    np.testing.assert_allclose(output, torch_mlp(weights, x), rtol=1e-4, atol=1e-4)
    assert session.effective_precision() == "fp32"
