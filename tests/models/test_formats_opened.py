"""Formats that open: a TorchScript archive (torch.jit.save) through torch.jit.load on the torch engines (a torch.save
pickle is still refused); an ONNX string input is named as such, with the extensions library its custom ops need."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.case import Case, MeasureSettings
from infermeter.errors import ModelError
from infermeter.measure.worker import execute_case
from infermeter.models.spec import load_torch_module, resolve_model

torch = pytest.importorskip("torch")


def _net() -> object:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten()).eval()


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "seg.pt"
    torch.jit.save(torch.jit.trace(_net(), torch.zeros(1, 3, 8, 8)), str(path))
    return path


def test_torchscript_archive_opens_and_runs_on_torch(archive: Path) -> None:
    spec = resolve_model(str(archive), (("input", (1, 3, 8, 8)),))
    assert spec.kind == "torchscript" and [i.name for i in spec.inputs] == ["input"]
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    with torch.inference_mode():
        got = load_torch_module(spec)(torch.from_numpy(x)).numpy()
        want = _net()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    settings = MeasureSettings(warmup_iterations=2, min_iterations=10, min_time_s=0.05, max_time_s=2.0)
    result = execute_case(spec, Case(str(archive), "torch", "fp32", 2, "static", 1, settings=settings))
    assert result.status == "ok", result.error
    assert result.input_shapes == {"input": [2, 3, 8, 8]}


def test_torchscript_without_shapes_says_which_flag(archive: Path) -> None:
    with pytest.raises(ModelError) as caught:
        resolve_model(str(archive))
    assert "TorchScript archive" in str(caught.value) and "--reshape input:" in str(caught.value)


def test_a_torch_save_pickle_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save(_net(), str(path))
    with pytest.raises(ModelError, match="pickle holding arbitrary Python objects"):
        resolve_model(str(path))


def test_a_string_input_is_named_so_with_the_extensions_library(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("StringRegexReplace", ["text"], ["out"], domain="ai.onnx.contrib")],
        "encoder",
        [helper.make_tensor_value_info("text", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("out", TensorProto.STRING, [1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.contrib", 1)]
    )
    path = tmp_path / "encoder.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ModelError) as caught:
        resolve_model(str(path))
    message = str(caught.value)
    assert "'text' is a string input" in message and "element type 8" not in message
    assert message.endswith("need onnxruntime-extensions (pip install onnxruntime-extensions)")
