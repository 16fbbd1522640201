"""Fixtures of the serving tests: servers on 127.0.0.1 (free port) in a thread, and tiny ONNX models."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from serve_helpers import make_server

from infermeter.serve.server import ServerThread


@pytest.fixture
def serve() -> Iterator[Any]:
    """`serve(model, backend, **config)` starts a server and returns its URL; all are stopped at teardown."""
    started: list[ServerThread] = []

    def start(model: str = "tiny_cnn", backend: str = "null", **overrides: Any) -> str:
        server = make_server(model, backend, **overrides)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


def _save(model: Any, path: Path) -> str:
    import onnx

    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture
def echo_onnx(tmp_path: Path) -> str:
    """X float32[batch, seq] -> Y = 2X [batch, seq] and C = seq as the model saw it [batch, 1] (counts padding)."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])),
        helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [1])),
        helper.make_node("Mul", ["X", "two"], ["Y"]),
        helper.make_node("Mul", ["X", "zero"], ["zeros"]),
        helper.make_node("Add", ["zeros", "one"], ["ones"]),
        helper.make_node("ReduceSum", ["ones", "axes"], ["C"], keepdims=1),
    ]
    graph = helper.make_graph(
        nodes,
        "echo",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", "seq"])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", "seq"]),
            helper.make_tensor_value_info("C", TensorProto.FLOAT, ["batch", 1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return _save(model, tmp_path / "echo.onnx")


@pytest.fixture
def gather_onnx(tmp_path: Path) -> str:
    """idx int64[batch, 1] -> table[idx] float32[batch, 1] with table = 10*[0..99]; an index >= 100 makes ONNX
    Runtime raise at run time (a real backend error)."""
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(100, dtype=np.float32) * 10, "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["out"], axis=0)],
        "gather",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", 1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 1])],
        initializer=[table],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return _save(model, tmp_path / "gather.onnx")
