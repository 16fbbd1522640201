"""Defaults that adapt: with no --batch, a model exported with a fixed batch runs the batch it allows (with a note),
in bench, optimize and serve; an explicit batch the model cannot take still fails with the reason."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cli_helpers import load_json, run_cli
from infermeter.core.errors import InputSpecError, UsageError
from infermeter.measure.request import DEFAULT_BATCHES, BenchRequest, build_matrix, default_batches
from infermeter.models.resolve import resolve_model


def _conv_model(path: Path, batch: int | str) -> str:
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def batch_one(tmp_path: Path) -> str:
    """A detector-like model exported with batch 1."""
    return _conv_model(tmp_path / "det.onnx", 1)


def test_no_batch_given_runs_the_fixed_batch_with_a_note(batch_one: str) -> None:
    notes: list[str] = []
    matrix = build_matrix(BenchRequest(models=(batch_one,), backends=("onnxruntime",)), notes.append)
    assert matrix.batches == (1,)
    assert any("fixes its batch at 1 (input 'x'): running batch 1" in note for note in notes), notes


def test_a_dynamic_batch_keeps_the_defaults_silently(tmp_path: Path) -> None:
    notes: list[str] = []
    dynamic = _conv_model(tmp_path / "dyn.onnx", "N")
    matrix = build_matrix(BenchRequest(models=(dynamic,), backends=("onnxruntime",)), notes.append)
    assert matrix.batches == DEFAULT_BATCHES == (1, 16)
    assert not [note for note in notes if "fixes its batch" in note]


def test_an_explicit_batch_the_model_cannot_take_still_fails(batch_one: str) -> None:
    with pytest.raises(InputSpecError, match="fixed batch of 1 in the model; use --batch 1"):
        build_matrix(BenchRequest(models=(batch_one,), backends=("onnxruntime",), batch=(4,)))


def test_models_fixing_different_batches_are_named(tmp_path: Path, batch_one: str) -> None:
    four = resolve_model(_conv_model(tmp_path / "four.onnx", 4))
    with pytest.raises(UsageError, match=r"det.onnx batch 1, .*four.onnx batch 4"):
        default_batches([resolve_model(batch_one), four], lambda _text: None)
    assert default_batches([four], lambda _text: None, defaults=(1, 8, 32)) == (4,)


def test_bench_cli_without_batch_runs_a_batch_one_model(batch_one: str, tmp_path: Path) -> None:
    out = tmp_path / "det.json"
    fast = ("--min-time", "0.05", "--iterations", "5", "--warmup", "1", "--rounds", "1", "--target-ci", "0")
    done = run_cli("bench", batch_one, "-b", "onnxruntime", *fast, "--no-history", "--no-roofline", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "fixes its batch at 1" in " ".join(done.stderr.split())
    cases = load_json(out)["cases"]
    assert [(case["batch"], case["status"]) for case in cases] == [(1, "ok")]
    refused = run_cli("bench", batch_one, "-b", "onnxruntime", "--batch", "4", "--no-history", "-o", str(out))
    assert refused.returncode == 2 and "use --batch 1" in refused.stderr


def test_serve_bounds_max_batch_by_the_fixed_batch(batch_one: str) -> None:
    pytest.importorskip("starlette")
    from infermeter.serve.protocol import encode_json_request
    from infermeter.serve.server import spawn_server

    server = spawn_server([batch_one, "--backend", "onnxruntime", "--threads", "1"])
    try:
        url = f"{server.url}/v2/models/det"
        assert httpx.get(url).json()["parameters"]["max_batch"] == 1
        one = httpx.post(f"{url}/infer", content=encode_json_request({"x": np.zeros((1, 3, 16, 16), np.float32)}))
        assert one.status_code == 200, one.text
        two = httpx.post(f"{url}/infer", content=encode_json_request({"x": np.zeros((2, 3, 16, 16), np.float32)}))
        assert two.status_code == 400 and "1 to 1 rows" in two.json()["error"]  # not a 500 from the engine
    finally:
        server.stop()


def test_a_fixed_first_dim_beside_a_symbolic_batch_is_not_a_fixed_batch() -> None:
    from infermeter.models.inputs import InputSpec, fixed_batch

    audio = InputSpec("input", "float32", shape=("batch", "samples"))
    state = InputSpec("state", "float32", shape=(2, "batch", 128))  # a recurrent state: its batch is not on axis 0
    assert fixed_batch([audio, state]) is None
    assert fixed_batch([InputSpec("x", "float32", shape=(1, 3, 64, 64))]) == ("x", 1)
