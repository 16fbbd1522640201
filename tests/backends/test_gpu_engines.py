"""The GPU engines on a real GPU (`gpu` marker: skipped, saying why, on a machine without one; run them where a
device is lent). Without a GPU the same engines must say why they are unavailable (test_onnxruntime_backend.py)."""

from __future__ import annotations

import pytest

from infermeter.measure.execute import execute_case


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["onnxruntime-cuda", "tensorrt"])
def test_a_gpu_engine_runs_tiny_cnn_on_the_gpu(tiny_cnn, make_case, backend: str) -> None:
    result = execute_case(tiny_cnn, make_case(backend))
    if result.status == "unavailable" and "pip install" in (result.error or ""):
        pytest.skip(f"{backend}'s package is not installed here: {result.error}")
    assert result.status == "ok", result.error
    assert result.latency_ms is not None and result.latency_ms.p50 > 0
