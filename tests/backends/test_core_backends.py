"""The two core framework backends on a tiny model: they load, run, agree with each other and report precision."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.backends.registry import get_backend
from infermeter.core.case import Case, MeasureSettings
from infermeter.measure.worker import execute_case
from infermeter.models.inputs import generate_feeds, resolve_shapes
from infermeter.models.resolve import resolve_model

FAST = MeasureSettings(warmup_iterations=1, min_iterations=5, min_time_s=0.0, max_time_s=5.0, target_ci=0.0)


def _outputs(backend: str, batch: int, shape_mode: str = "static") -> list[np.ndarray]:
    spec = resolve_model("tiny_cnn")
    case = Case("tiny_cnn", backend, precision="fp32", batch=batch, shape_mode=shape_mode, threads=1, settings=FAST)
    session = get_backend(backend)().load(spec, case)
    feeds = generate_feeds(spec.inputs, resolve_shapes(spec.inputs, batch), 1, seed=5)[0]
    try:
        assert session.effective_precision() == "fp32"
        return session.outputs_to_numpy(session.run(session.prepare(feeds)))
    finally:
        session.close()


@pytest.mark.parametrize("batch", [1, 3])
def test_torch_and_onnxruntime_agree_in_fp32(batch: int) -> None:
    (torch_out,) = _outputs("torch", batch)
    (ort_out,) = _outputs("onnxruntime", batch)
    assert torch_out.shape == ort_out.shape == (batch, 10)
    np.testing.assert_allclose(ort_out, torch_out, rtol=1e-4, atol=1e-5)
    assert np.abs(torch_out).max() > 1e-3  # not trivially zero


def test_onnxruntime_dynamic_shape_mode_accepts_other_batches() -> None:
    (out,) = _outputs("onnxruntime", 2, shape_mode="dynamic")
    assert out.shape == (2, 10)


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_execute_case_measures_a_real_backend(backend: str) -> None:
    spec = resolve_model("tiny_cnn")
    result = execute_case(
        spec, Case("tiny_cnn", backend, precision="fp32", batch=2, shape_mode="static", threads=1, settings=FAST)
    )
    assert result.status == "ok", result.error
    assert result.precision_effective == "fp32"
    assert result.timing.iterations >= 5 and result.latency_ms is not None and result.latency_ms.p50 > 0
    assert (
        result.loading.load_s is not None and result.loading.load_s > 0 and "import_s" in result.loading.load_phases_s
    )
    assert result.shapes.input_shapes == {"input": [2, 3, 32, 32]}


def test_torch_bf16_is_read_back_from_the_module() -> None:
    spec = resolve_model("tiny_cnn")
    case = Case("tiny_cnn", "torch", precision="bf16", batch=1, shape_mode="static", threads=1, settings=FAST)
    session = get_backend("torch")().load(spec, case)
    assert session.effective_precision() == "bf16"


def test_onnx_conversion_is_cached_and_a_corrupt_entry_is_rebuilt() -> None:
    from infermeter.models.convert import onnx_for

    spec = resolve_model("tiny_cnn")
    first = onnx_for(spec)
    again = onnx_for(spec)
    assert again.cache_hit and again.path == first.path
    first.path.write_bytes(first.path.read_bytes()[:100])  # truncate: the checksum no longer matches
    rebuilt = onnx_for(spec)
    assert not rebuilt.cache_hit and "rebuilt" in rebuilt.note
    assert rebuilt.path.stat().st_size > 1000
