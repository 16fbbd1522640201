"""ONNX Runtime backends: parity, the optimized-model cache (hit, corrupt entry rebuilt), GPU providers' reasons."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend_helpers import feeds_for, outputs_of, torch_reference
from infermeter.backends.onnxruntime import OnnxRuntimeBackend
from infermeter.backends.onnxruntime_gpu import OnnxRuntimeCudaBackend, OnnxRuntimeTensorRTBackend
from infermeter.backends.registry import get_backend
from infermeter.measure.worker import execute_case

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("cache", ["on", "off"])
def test_fp32_outputs_match_torch(tiny_cnn, make_case, cache):
    case = make_case("onnxruntime", options={"cache": cache})
    feeds = feeds_for(tiny_cnn, case)
    np.testing.assert_allclose(
        outputs_of(tiny_cnn, case, feeds)[0], torch_reference(tiny_cnn, case, feeds)[0], rtol=1e-4, atol=1e-5
    )


def test_optimized_model_cache_hit_and_corrupt_entry_rebuilt(tiny_cnn, make_case, cache_dir):
    case = make_case("onnxruntime", batch=3, options={"onnxruntime.opt_level": "extended"})
    first = OnnxRuntimeBackend().load(tiny_cnn, case)
    assert first.cache_hit is False
    second = OnnxRuntimeBackend().load(tiny_cnn, case)
    assert second.cache_hit is True
    assert any("loaded from cache" in note for note in second.notes)
    newest = max(Path(cache_dir, "onnxruntime").glob("*.onnx"), key=lambda p: p.stat().st_mtime_ns)
    with newest.open("r+b") as handle:
        handle.truncate(100)
    third = OnnxRuntimeBackend().load(tiny_cnn, case)
    assert third.cache_hit is False
    assert any("rebuilt" in note for note in third.notes)
    feeds = feeds_for(tiny_cnn, case)
    reference = torch_reference(tiny_cnn, case, feeds)[0]
    for session in (second, third):
        np.testing.assert_allclose(
            session.outputs_to_numpy(session.run(session.prepare(feeds)))[0], reference, rtol=1e-4, atol=1e-5
        )


def test_cache_off_reports_no_cache(tiny_cnn, make_case):
    result = execute_case(tiny_cnn, make_case("onnxruntime", options={"cache": "off"}))
    assert result.status == "ok" and result.cache_hit is None and result.precision_effective == "fp32"


def test_reduced_precision_is_unavailable_with_reason(tiny_cnn, make_case):
    for precision in ("fp16", "bf16"):
        result = execute_case(tiny_cnn, make_case("onnxruntime", precision=precision))
        assert result.status == "unavailable"
        assert "kernels" in (result.error or "")


@pytest.mark.parametrize("backend", [OnnxRuntimeCudaBackend, OnnxRuntimeTensorRTBackend])
def test_gpu_providers_say_why_not(backend):
    reason = backend.available()
    if reason is None:
        pytest.skip("a GPU build and a GPU are present")
    assert "onnxruntime-gpu" in reason or "GPU" in reason
    assert backend.device == "cuda"


def test_gpu_provider_refuses_silent_cpu_fallback():
    class FellBack:
        def get_providers(self) -> list[str]:
            return ["CPUExecutionProvider"]

    with pytest.raises(Exception, match="silent"):
        get_backend("onnxruntime-cuda")().check_providers(FellBack())
