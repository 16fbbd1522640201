"""ONNX Runtime backends: parity, the optimized graph as a build (hit, corrupt entry rebuilt), GPU reasons."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backend_helpers import feeds_for, outputs_of, torch_reference
from infermeter.backends.onnxruntime import OnnxRuntimeBackend
from infermeter.backends.onnxruntime_gpu import OnnxRuntimeCudaBackend, OnnxRuntimeTensorRTBackend
from infermeter.backends.registry import get_backend
from infermeter.build.case_build import build_artifact
from infermeter.measure.worker import execute_case

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("cache", ["on", "off"])
def test_fp32_outputs_match_torch(tiny_cnn, make_case, cache):
    case = make_case("onnxruntime", options={"cache": cache})
    feeds = feeds_for(tiny_cnn, case)
    np.testing.assert_allclose(
        outputs_of(tiny_cnn, case, feeds)[0], torch_reference(tiny_cnn, case, feeds)[0], rtol=1e-4, atol=1e-5
    )


def test_optimized_graph_built_once_hit_then_corrupt_entry_rebuilt(tiny_cnn, make_case, cache_dir):
    case = make_case("onnxruntime", batch=3, options={"onnxruntime.opt_level": "extended"})
    first = build_artifact(tiny_cnn, case)
    assert first is not None and first.cache == "built" and first.build_phases_s["optimize_s"] > 0
    second = build_artifact(tiny_cnn, case)
    assert second is not None and second.cache == "hit" and second.path == first.path
    assert second.build_phases_s == first.build_phases_s  # a hit still knows what its build cost
    with Path(first.path).open("r+b") as handle:
        handle.truncate(100)
    third = build_artifact(tiny_cnn, case)
    assert third is not None and third.cache == "rebuilt"
    assert any("checksum" in note for note in third.notes)
    feeds = feeds_for(tiny_cnn, case)
    reference = torch_reference(tiny_cnn, case, feeds)[0]
    session = OnnxRuntimeBackend().load(tiny_cnn, case, third)
    assert any("optimized graph of the build stage" in note for note in session.notes)
    np.testing.assert_allclose(
        session.outputs_to_numpy(session.run(session.prepare(feeds)))[0], reference, rtol=1e-4, atol=1e-5
    )


def test_nothing_to_build_without_cache_or_optimization(tiny_cnn, make_case):
    assert build_artifact(tiny_cnn, make_case("onnxruntime", options={"cache": "off"})) is None
    assert build_artifact(tiny_cnn, make_case("onnxruntime", options={"onnxruntime.opt_level": "disable"})) is None


def test_cache_off_reports_no_cache(tiny_cnn, make_case):
    result = execute_case(tiny_cnn, make_case("onnxruntime", options={"cache": "off"}))
    assert result.status == "ok" and result.loading.cache_hit is None and result.precision_effective == "fp32"


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


def test_the_profiler_trace_is_read_per_node_and_grouped() -> None:
    from infermeter.backends.onnxruntime_profile import is_compute, op_precision, profile_from_trace

    def kernel(name: str, op: str, dur_us: float) -> dict[str, object]:
        return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur_us, "args": {"op_name": op}}

    run = [kernel("q", "QuantizeLinear", 10), kernel("conv", "QLinearConv", 100), kernel("fc", "Gemm", 50),
           kernel("r", "ReorderInput", 20), {"cat": "Session", "name": "model_run", "dur": 999}]  # fmt: skip
    warmup = [kernel("conv", "QLinearConv", 5000)]
    profile = profile_from_trace(warmup + run * 3, iterations=3)
    # The warm-up's slow first run is left out.
    assert profile.total_ms == pytest.approx(0.18) and profile.iterations == 3
    assert (profile.quantize_nodes.count, profile.reorders.count, profile.float_compute.count) == (1, 1, 1)
    assert profile.top[0].name == "conv" and profile.top[0].precision == "int8"
    assert [is_compute(op) for op in ("NhwcFusedConv", "MatMulIntegerToFloat", "QGemm", "Relu")] == [1, 1, 1, 0]
    assert (op_precision("DynamicQuantizeMatMul"), op_precision("FusedConv")) == ("int8", "fp32")
