"""The Triton mapping is declared once per backend (`Backend.triton`, backends/triton.py) and read both ways:
what `deploy` writes for a case, `serve REPO` reads back as the same settings."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infermeter.backends.registry import get_backend, inference_backends
from infermeter.deploy.pbtxt import parse
from infermeter.deploy.repository import _engine_settings, _Fail
from infermeter.deploy.triton import _optimization_lines, engine_parameters


def _config(backend: str, precision: str, threads: int, options: dict[str, str]) -> str:
    """The engine part of the config.pbtxt `deploy` writes for such a case."""
    case = SimpleNamespace(
        id="c1", backend=backend, precision=precision, precision_effective=precision, threads=threads, options=options
    )
    source: Any = SimpleNamespace(case=case)
    lines = _optimization_lines(source)
    for parameter in engine_parameters(source):
        lines.append(f'parameters {{ key: "{parameter.key}" value {{ string_value: "{parameter.value}" }} }}')
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("backend", "precision", "options"),
    [
        ("onnxruntime", "fp32", {}),
        ("onnxruntime", "fp32", {"onnxruntime.opt_level": "extended"}),
        ("openvino", "fp32", {}),
        ("openvino", "bf16", {"openvino.hint": "throughput", "openvino.streams": "2"}),
    ],
)
def test_what_deploy_writes_serve_reads_back(backend: str, precision: str, options: dict[str, str]) -> None:
    text = _config(backend, precision, 3, options)
    read = _engine_settings(backend, parse(text), _Fail(Path("config.pbtxt")))
    defaults = {"openvino.hint": "latency"} if backend == "openvino" else {}
    assert read == (precision, 3, defaults | options), text


def test_the_written_settings_are_the_engines_own_keys() -> None:
    text = _config("openvino", "int8", 2, {})
    # A quantized file fixes int8 itself; the hint governs its float layers, as when measured.
    assert 'key: "INFERENCE_PRECISION_HINT" value { string_value: "f32" }' in text
    assert 'key: "PERFORMANCE_HINT" value { string_value: "LATENCY" }' in text
    assert "NUM_STREAMS" not in text  # left to the engine when the case did not set it
    ort = _config("onnxruntime", "fp32", 2, {"onnxruntime.opt_level": "basic"})
    assert "optimization { graph { level: -1 } }" in ort and 'key: "inter_op_thread_count"' in ort
    assert "graph" not in _config("onnxruntime-cuda", "fp32", 2, {"onnxruntime.opt_level": "basic"})
    assert 'name: "tensorrt"' in _config("onnxruntime-tensorrt", "fp16", 1, {})
    assert 'key: "INTRA_OP_THREAD_COUNT" value { string_value: "4" }' in _config("torchscript", "fp32", 4, {})


def test_every_spelling_of_a_backend_reads_back_as_itself() -> None:
    targets = [cls.triton for cls in inference_backends() if cls.triton is not None]
    assert len(targets) >= 4
    for target in targets:
        for parameter in target.parameters:
            for ours, theirs in parameter.values:
                assert (parameter.triton_value(ours), parameter.our_value(theirs)) == (theirs, ours)
        if target.graph_level is not None:
            assert len(dict(target.graph_level.levels)) == len({level for _, level in target.graph_level.levels})
    hint = get_backend("openvino").triton
    assert hint is not None and hint.streams_option == "openvino.streams"
