"""Tiny ONNX graphs built with onnx.helper for the graph-analysis tests."""

from __future__ import annotations

from collections.abc import Sequence

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
