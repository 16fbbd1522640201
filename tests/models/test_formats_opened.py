"""Formats that open: a TorchScript archive (torch.jit.save) through torch.jit.load on the torch engines (a torch.save
pickle is still refused); an ONNX string input takes texts from --data, and a graph with onnxruntime-extensions'
custom operators names that library."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infermeter.core.case import Case, MeasureSettings
from infermeter.core.errors import ModelError
from infermeter.measure.worker import execute_case
from infermeter.models.resolve import resolve_model
from infermeter.models.torch_form import load_torch_module

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
    result = execute_case(
        spec, Case(str(archive), "torch", precision="fp32", batch=2, shape_mode="static", threads=1, settings=settings)
    )
    assert result.status == "ok", result.error
    assert result.shapes.input_shapes == {"input": [2, 3, 8, 8]}


def test_torchscript_without_shapes_says_which_flag(archive: Path) -> None:
    with pytest.raises(ModelError) as caught:
        resolve_model(str(archive))
    assert "TorchScript archive" in str(caught.value) and "--reshape input:" in str(caught.value)


def test_a_torch_save_pickle_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save(_net(), str(path))
    with pytest.raises(ModelError, match="pickle holding arbitrary Python objects"):
        resolve_model(str(path))


def _string_model(path: Path, custom: bool) -> Path:
    """One string input `text`: a LabelEncoder to ids (standard ai.onnx.ml), or a custom operator of
    onnxruntime-extensions (`custom`)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    if custom:
        node = helper.make_node("StringRegexReplace", ["text"], ["ids"], domain="ai.onnx.contrib")
        domain, out_type = helper.make_opsetid("ai.onnx.contrib", 1), TensorProto.STRING
    else:
        node = helper.make_node("LabelEncoder", ["text"], ["ids"], domain="ai.onnx.ml", keys_strings=["hello", "world"],
                                values_int64s=[1, 2], default_int64=0)  # fmt: skip
        domain, out_type = helper.make_opsetid("ai.onnx.ml", 2), TensorProto.INT64
    graph = helper.make_graph(
        [node],
        "encoder",
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["batch"])],
        [helper.make_tensor_value_info("ids", out_type, ["batch"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), domain])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def test_a_string_input_takes_texts_from_data(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend
    from infermeter.core.errors import InputSpecError
    from infermeter.models.inputs import generate_feeds
    from infermeter.models.samples import load_samples

    spec = resolve_model(str(_string_model(tmp_path / "encoder.onnx", custom=False)))
    assert [(i.name, i.dtype) for i in spec.inputs] == [("text", "str")]
    with pytest.raises(InputSpecError, match=r"'text' is a string input.*--data texts\.txt"):
        generate_feeds(spec.inputs, {"text": (2,)}, 1)
    texts = tmp_path / "texts.txt"
    texts.write_text("hello\n\nworld\nother\n")
    samples = load_samples(spec.inputs, str(texts))
    assert samples.count == 3
    session = OnnxRuntimeBackend().load(
        spec, Case(spec.ref, "onnxruntime", precision="fp32", batch=3, shape_mode="static", threads=1)
    )
    (ids,) = session.outputs_to_numpy(session.run(session.prepare(next(samples.batches(3)))))
    assert ids.tolist() == [1, 2, 0]


def test_custom_string_ops_name_onnxruntime_extensions(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from infermeter.backends.onnxruntime import OnnxRuntimeBackend
    from infermeter.core.errors import BackendError

    try:
        import onnxruntime_extensions  # noqa: F401

        pytest.skip("onnxruntime-extensions is installed: its operators load")
    except ImportError:
        pass
    spec = resolve_model(str(_string_model(tmp_path / "tokenizer.onnx", custom=True)))
    case = Case(
        spec.ref, "onnxruntime", precision="fp32", batch=1, shape_mode="static", threads=1, options=(("cache", "off"),)
    )
    with pytest.raises(BackendError) as caught:
        OnnxRuntimeBackend().load(spec, case)
    message = str(caught.value)
    assert "custom operators of ai.onnx.contrib" in message
    assert message.endswith("install onnxruntime-extensions (pip install onnxruntime-extensions)")
