"""Small ONNX models built in code for the input-plan tests (imported by path)."""

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


def encoder(path: Path) -> str:
    """input_ids, attention_mask int64 [batch, sequence] (a shared symbolic dim) -> y = ids × mask, float."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["ids", "mask"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
        for name in ("input_ids", "attention_mask")
    ]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence"])
    return _save(helper.make_graph(nodes, "encoder", inputs, [output]), path)


def controlled(path: Path) -> str:
    """x float [batch, T] and a control vector scales float [3] -> y = x × sum(scales) (a TTS model's shape)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("ReduceSum", ["scales"], ["s"], keepdims=0), helper.make_node("Mul", ["x", "s"], ["y"])]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "T"]),
        helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
    ]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "T"])
    return _save(helper.make_graph(nodes, "controlled", inputs, [output]), path)


def frames_of_fifty(path: Path) -> str:
    """x float [batch, T] reshaped to [-1, 50]: fails unless T is a multiple of 50 (the default T=1 is not)."""
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([-1, 50], dtype=np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "T"])]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 50])
    return _save(helper.make_graph(nodes, "frames", inputs, [output], initializer=[shape]), path)


def fixed_image(path: Path) -> str:
    """x float declared [1, 3, 8, 8] (a dummy export shape) flattened to a constant [1, 768]: runs only once
    reshaped to [1, 3, 16, 16], as the model's own application does."""
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([1, 768], dtype=np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 768])
    return _save(helper.make_graph(nodes, "fixed", inputs, [output], initializer=[shape]), path)


def quantized(path: Path) -> str:
    """x float [batch, 4] through a QuantizeLinear/DequantizeLinear pair: an INT8 graph by its own ops."""
    from onnx import TensorProto, helper, numpy_helper

    scale = numpy_helper.from_array(np.array(0.1, dtype=np.float32), "scale")
    zero = numpy_helper.from_array(np.array(0, dtype=np.int8), "zero")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "scale", "zero"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    return _save(helper.make_graph(nodes, "qdq", inputs, [output], initializer=[scale, zero]), path)
