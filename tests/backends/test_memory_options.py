"""The engines' memory settings as backend options (issue 32's soak variants): ONNX Runtime's CPU arena, memory
pattern, arena extend strategy and per-run shrinkage; OpenVINO's compiled-shape cache capacity."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.core.case import Case
from infermeter.core.errors import BackendError
from infermeter.models.resolve import resolve_model

SHRINK = ("onnxruntime.arena_shrink", "on")


def test_onnxruntime_memory_options_reach_the_session_and_its_run_options() -> None:
    pytest.importorskip("onnxruntime")
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend

    spec = resolve_model("tiny_cnn")
    options = (("onnxruntime.cpu_arena", "off"), ("onnxruntime.mem_pattern", "off"))
    session = OnnxRuntimeBackend().load(spec, Case(spec.ref, "onnxruntime", options=options))
    read_back = session.ort_session.get_session_options()
    assert read_back.enable_cpu_mem_arena is False and read_back.enable_mem_pattern is False
    session.close()
    with pytest.raises(BackendError, match="needs cpu_arena on"):
        OnnxRuntimeBackend().load(spec, Case(spec.ref, "onnxruntime", options=(*options, SHRINK)))
    session = OnnxRuntimeBackend().load(spec, Case(spec.ref, "onnxruntime", options=(SHRINK,)))
    try:
        run_options = session._run_options
        assert run_options.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
        feeds = session.prepare({"input": np.zeros((1, 3, 32, 32), np.float32)})
        assert session.outputs_to_numpy(session.run(feeds))  # runs with its run options
    finally:
        session.close()
    plain = OnnxRuntimeBackend().load(spec, Case(spec.ref, "onnxruntime"))
    assert plain.ort_session.get_session_options().enable_cpu_mem_arena is True and plain._run_options is None
    plain.close()


def test_onnxruntime_same_as_requested_arena_uses_the_environment_allocator() -> None:
    pytest.importorskip("onnxruntime")
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend

    spec = resolve_model("tiny_cnn")
    case = Case(spec.ref, "onnxruntime", options=(("onnxruntime.arena_extend", "same_as_requested"),))
    session = OnnxRuntimeBackend().load(spec, case)
    try:
        entries = session.ort_session.get_session_options().get_session_config_entry("session.use_env_allocators")
        assert entries == "1"
    finally:
        session.close()


def test_openvino_cache_capacity_goes_into_the_compile_config_only_when_set() -> None:
    from infermeter.backends.openvino_backend import OpenVinoBackend

    spec = resolve_model("tiny_cnn")
    assert "CPU_RUNTIME_CACHE_CAPACITY" not in OpenVinoBackend._config(Case(spec.ref, "openvino"))
    case = Case(spec.ref, "openvino", options=(("openvino.cache_capacity", "0"),))
    assert OpenVinoBackend._config(case)["CPU_RUNTIME_CACHE_CAPACITY"] == 0
