"""Tiny ONNX models whose inputs' values matter, for the `--data` and `--input NAME=VALUE` tests (imported by path:
`tests/` is not a package)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _save(graph: object, path: Path) -> str:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def branch_model(path: Path) -> str:
    """x float32[batch, 4] and a scalar control input sr int64[]: when sr == 16000, y = 2x; otherwise y = x[:, sr]
    (as a voice-activity model runs another branch at another rate), which ONNX Runtime refuses at run time for
    any sr outside 0..3: a generated sr (0..99) fails, `--input sr=16000` runs."""
    from onnx import TensorProto, helper

    then_graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y_then"])],
        "rate_16k",
        [],
        [helper.make_tensor_value_info("y_then", TensorProto.FLOAT, ["batch", "w"])],
    )
    else_graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["sr", "axis0"], ["sr_1d"]),
            helper.make_node("Gather", ["x", "sr_1d"], ["y_else"], axis=1),
        ],
        "other_rate",
        [],
        [helper.make_tensor_value_info("y_else", TensorProto.FLOAT, ["batch", "w"])],
    )
    nodes = [
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])),
        helper.make_node("Constant", [], ["axis0"], value=helper.make_tensor("axis0", TensorProto.INT64, [1], [0])),
        helper.make_node("Constant", [], ["rate"], value=helper.make_tensor("rate", TensorProto.INT64, [], [16000])),
        helper.make_node("Equal", ["sr", "rate"], ["is_16k"]),
        helper.make_node("If", ["is_16k"], ["y"], then_branch=then_graph, else_branch=else_graph),
    ]
    graph = helper.make_graph(
        nodes,
        "branch",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("sr", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "w"])],
    )
    return _save(graph, path)


def lookup_model(path: Path, size: int = 10) -> str:
    """idx int64[batch, 1] -> table[idx] float32[batch, 1] with a table of `size` rows: generated indices (0..99)
    fall outside it and ONNX Runtime raises at run time, real indices in 0..size-1 run."""
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(size, dtype=np.float32), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["out"], axis=0)],
        "lookup",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", 1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 1])],
        initializer=[table],
    )
    return _save(graph, path)


def image_model(path: Path) -> str:
    """x float32[batch, 3, 8, 8] -> the per-image mean [batch, 1] (an image folder's model)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["mean"], axes=[1, 2, 3], keepdims=0)],
        "image_mean",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["batch"])],
    )
    return _save(graph, path)
