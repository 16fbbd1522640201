"""User model sources: file.py:factory, package.module:factory, .pt2 programs, and refused pickles."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from cli_helpers import run_cli
from infermeter.core.errors import ModelError
from infermeter.models.convert import onnx_for
from infermeter.models.inputs import generate_feeds, resolve_shapes
from infermeter.models.resolve import resolve_model
from infermeter.models.sources import parse_python_ref
from infermeter.models.torch_form import load_torch_module

FACTORIES = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(x).relu()

    class TwoIn(nn.Module):
        def forward(self, tokens, scale):
            return tokens.float().sum(1, keepdim=True) * scale, tokens.max(1).values

    def examples():
        torch.manual_seed(0)
        return Net(), (torch.randn(2, 6),)

    def keyword():
        return TwoIn(), {"scale": torch.ones(2, 1), "tokens": torch.randint(0, 50, (2, 5))}

    def spec():
        return Net(), {"x": ("float32", ("batch", 6))}

    def not_a_pair():
        return Net()
    """
)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "my_models.py"
    path.write_text(FACTORIES)
    return path


def test_parse_python_ref() -> None:
    assert parse_python_ref("a/b/net.py:build") == ("file", "a/b/net.py", "build")
    assert parse_python_ref("pkg.mod:make") == ("module", "pkg.mod", "make")
    assert parse_python_ref("resnet18") is None
    assert parse_python_ref("model.onnx") is None


def test_file_factory_with_example_tensors(source: Path) -> None:
    spec = resolve_model(f"{source}:examples")
    assert spec.kind == "python"
    assert [(i.name, i.dtype, i.shape) for i in spec.inputs] == [("input", "float32", ("batch", 6))]
    assert spec.output_names == ("output",)
    module = load_torch_module(spec)
    assert not module.training
    assert module(torch.randn(4, 6)).shape == (4, 3)


def test_keyword_inputs_are_passed_by_name(source: Path) -> None:
    spec = resolve_model(f"{source}:keyword")
    assert [i.name for i in spec.inputs] == ["scale", "tokens"]
    assert spec.inputs[1].dtype == "int64" and spec.inputs[1].int_range[1] <= 50
    assert spec.output_names == ("output_0", "output_1")
    feeds = generate_feeds(spec.inputs, resolve_shapes(spec.inputs, 3), 1)[0]
    module = load_torch_module(spec)
    summed, _ = module(*(torch.from_numpy(feeds[i.name]) for i in spec.inputs))  # positional, in spec order
    expected = feeds["tokens"].sum(1, keepdims=True) * feeds["scale"]
    np.testing.assert_allclose(summed.numpy(), expected, rtol=1e-6)


def test_factory_with_input_spec(source: Path) -> None:
    spec = resolve_model(f"{source}:spec")
    assert spec.inputs[0].shape == ("batch", 6)
    assert resolve_shapes(spec.inputs, 5) == {"x": (5, 6)}


def test_content_hash_follows_file_and_factory(source: Path) -> None:
    first = resolve_model(f"{source}:examples").content_hash
    assert resolve_model(f"{source}:spec").content_hash != first
    source.write_text(FACTORIES + "\n# edited\n")
    assert resolve_model(f"{source}:examples").content_hash != first


def test_module_factory(source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(source.parent))
    try:
        spec = resolve_model("my_models:examples")
        assert spec.kind == "python" and spec.path == str(source.resolve())
        assert load_torch_module(spec)(torch.randn(1, 6)).shape == (1, 3)
    finally:
        sys.modules.pop("my_models", None)


def test_bad_factories_are_clear(source: Path) -> None:
    with pytest.raises(ModelError, match=r"must return \(nn.Module, inputs\)"):
        resolve_model(f"{source}:not_a_pair")
    with pytest.raises(ModelError, match="no function 'missing'"):
        resolve_model(f"{source}:missing")
    with pytest.raises(ModelError, match="does not exist"):
        resolve_model(f"{source.parent / 'nope.py'}:examples")


def test_pt2_program(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Tanh()).eval()
    batch = torch.export.Dim("batch")
    program = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: batch},))
    path = tmp_path / "net.pt2"
    torch.export.save(program, str(path))
    spec = resolve_model(str(path))
    assert spec.kind == "pt2"
    assert [(i.dtype, i.shape) for i in spec.inputs] == [("float32", ("batch", 4))]
    x = torch.randn(5, 4)
    torch.testing.assert_close(load_torch_module(spec)(x), model(x))


def test_pickled_module_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "full.pt"
    torch.save(torch.nn.Linear(3, 2), str(path))  # a full module: unpickling it would run code from the file
    with pytest.raises(ModelError, match=r"arbitrary Python objects.*weights_only=True") as info:
        resolve_model(str(path))
    assert "torch.nn.modules.linear.Linear" in str(info.value)
    weights = tmp_path / "weights.pth"
    torch.save(torch.nn.Linear(3, 2).state_dict(), str(weights))
    with pytest.raises(ModelError, match="state dict of weights but no architecture"):
        resolve_model(str(weights))


def test_cli_rejects_bad_model_files_with_exit_2(tmp_path: Path) -> None:
    corrupt = tmp_path / "broken.pt2"
    corrupt.write_bytes(b"not a zip archive at all")
    pickled = tmp_path / "full.pt"
    torch.save(torch.nn.Linear(3, 2), str(pickled))
    for ref, message in ((corrupt, "not a readable torch.export program"), (pickled, "arbitrary Python objects")):
        done = run_cli("export", str(ref), "-o", str(tmp_path / "out.onnx"))
        assert done.returncode == 2, done.stderr
        assert message in done.stderr
        assert "Traceback" not in done.stderr


def test_onnx_for_user_sources_has_a_dynamic_batch(source: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    model = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Tanh()).eval()
    program = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    pt2 = tmp_path / "net.pt2"
    torch.export.save(program, str(pt2))
    for ref, width in ((f"{source}:examples", 6), (str(pt2), 4)):
        spec = resolve_model(ref)
        artifact = onnx_for(spec)
        session = ort.InferenceSession(str(artifact.path), providers=["CPUExecutionProvider"])
        x = np.random.default_rng(0).standard_normal((5, width)).astype(np.float32)
        got = session.run(None, {spec.inputs[0].name: x})[0]
        expected = load_torch_module(spec)(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)
        assert onnx_for(spec).cache_hit


def test_a_graph_file_with_no_torch_form_names_the_backends_that_read_it() -> None:
    """Models sit below the backends: the error carries the file's suffix and the command line names the readers."""
    import pickle

    from infermeter.cli.common import error_message
    from infermeter.models.spec import ModelSpec, NoTorchForm

    spec = ModelSpec(
        "m.tflite", "m", kind="tflite", inputs=(), output_names=("y",), content_hash="0" * 16, path="/models/m.tflite"
    )
    with pytest.raises(NoTorchForm) as caught:
        load_torch_module(spec)
    assert isinstance(caught.value, ModelError) and caught.value.suffix == ".tflite"
    assert error_message(caught.value) == (
        "'m.tflite' is a tflite model and has no PyTorch form; .tflite files run as they are on openvino, tflite "
        "(infermeter converts only from PyTorch)"
    )
    copied = pickle.loads(pickle.dumps(caught.value))  # as a worker's error reaches its parent
    assert (str(copied), copied.suffix) == (str(caught.value), ".tflite")
    unread = ModelSpec(
        "m.bin", "m", kind="onnx", inputs=(), output_names=("y",), content_hash="0" * 16, path="/models/m.bin"
    )
    with pytest.raises(NoTorchForm) as caught:
        load_torch_module(unread)
    assert error_message(caught.value).endswith("has no PyTorch form; this command needs a PyTorch or ONNX model")
