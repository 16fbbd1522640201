"""Tiny ONNX graphs built with onnx.helper for the graph-analysis tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def weight(name: str, shape: Sequence[int], value: float | None = None) -> onnx.TensorProto:
    """A float32 initializer (seeded random, or filled with `value`)."""
    array = (
        np.full(shape, value, dtype=np.float32)
        if value is not None
        else np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    )
    return numpy_helper.from_array(array, name)


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, Sequence[int | str]],
    outputs: Sequence[str],
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 18,
) -> onnx.ModelProto:
    """A float32 model; output shapes are left to shape inference."""
    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


# `reshape_matmul`: x [N, 8, 16] reshaped to [-1, 4, 32] (the 4 computed from Shape(x)), then MatMul with
# W [32, 4]; the tests inspect it at this batch.
BATCH = 2


def _ints(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


# How the second dim of the Reshape target is computed from Shape(x) = [N, 8, 16]; each yields 4 (so 8x16 -> 4x32).
TARGET_DIM = {
    # 8 / 2 through float: ONNX's data propagation stops at the Cast, ONNX Runtime's symbolic inference does not.
    "symbolic": [
        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["sf", "two_f"], ["sd"]),
        helper.make_node("Cast", ["sd"], ["si"], to=TensorProto.INT64),
        helper.make_node("Slice", ["si", "one", "two"], ["k"]),
    ],
    # ReduceProd(8) / 2: neither inference evaluates it; one real run does.
    "run": [
        helper.make_node("Slice", ["s", "one", "two"], ["d1"]),
        helper.make_node("ReduceProd", ["d1"], ["p"], keepdims=1),
        helper.make_node("Div", ["p", "two"], ["k"]),
    ],
}


def reshape_matmul(path: Path, target: list[onnx.NodeProto], mystery: bool = False) -> str:
    """The recognizer-like pattern: Reshape to a computed shape, then MatMul (with an op no engine knows before it
    when `mystery`, so that not even a run can tell the shapes)."""
    reshaped = "r"
    nodes = [helper.make_node("Shape", ["x"], ["s"]), *target]
    nodes += [
        helper.make_node("Concat", ["minus_one", "k", "k32"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
    ]
    if mystery:
        nodes.append(helper.make_node("Mystery", ["r"], ["m"], domain="com.example"))
        reshaped = "m"
    nodes.append(helper.make_node("MatMul", [reshaped, "w"], ["y"]))
    constants = [_ints("one", [1]), _ints("two", [2]), _ints("minus_one", [-1]), _ints("k32", [32])]
    constants += [numpy_helper.from_array(np.array([2.0], np.float32), "two_f")]
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32), "w")
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weight, *constants],
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.example", 1)] if mystery else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)
